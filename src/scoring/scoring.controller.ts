import { Body, Controller, Get, HttpCode, Param, Post } from '@nestjs/common';
import { ApiOperation, ApiTags } from '@nestjs/swagger';
import { CurrentPrincipal } from '../auth/current-principal.decorator.js';
import { RequirePermission } from '../auth/permissions.js';
import { IdPipe } from '../common/id.pipe.js';
import { ApiEnvelope } from '../common/openapi.js';
import type { Principal } from '../common/request.js';
import { ScoringJobRecordDto, ScoringSettingsDto, ScoringSettingsRecordDto, WhatIfDto } from './scoring.dto.js';
import { ScoringJobsService } from './scoring-jobs.service.js';

/** Scoring settings (decay), recompute and what-if. */
@ApiTags('scoring')
@Controller('api/scoring')
export class ScoringController {
  constructor(private readonly scoring: ScoringJobsService) {}

  @Get('settings')
  @RequirePermission('scoring:read')
  @ApiOperation({ summary: 'The scoring settings: decay ({ percent, every, since } or null)' })
  @ApiEnvelope('settings', ScoringSettingsRecordDto)
  async settings() {
    return { settings: await this.scoring.settings() };
  }

  @Post('settings')
  @HttpCode(200)
  @RequirePermission('scoring:write')
  @ApiOperation({
    summary: 'Set decay: { decay: { percent: 1..100, every: "30d" } | null }',
    description:
      'Each period (counted from now) takes percent% of every contact’s points towards 0 (rounded up), as ledger rows `source: decay`, ' +
      'exactly once per contact and period, by a scheduled job. New settings start their periods afresh; null turns decay off.',
  })
  @ApiEnvelope('settings', ScoringSettingsRecordDto)
  async setSettings(@Body() dto: ScoringSettingsDto) {
    return { settings: await this.scoring.setSettings(dto) };
  }

  @Post('recompute')
  @HttpCode(202)
  @RequirePermission('scoring:write')
  @ApiOperation({
    summary: "Check every contact's points against its ledger and repair a difference (202 with the job)",
    description: 'Follow the job with GET /api/scoring/jobs/{id}; its result is { checked, repaired } (repaired is expected to be 0).',
  })
  @ApiEnvelope('job', ScoringJobRecordDto, { status: 202 })
  async recompute(@CurrentPrincipal() who: Principal) {
    return { job: await this.scoring.startRecompute(who) };
  }

  @Post('what-if')
  @HttpCode(202)
  @RequirePermission('scoring:read')
  @ApiOperation({
    summary: 'Replay the stored events (change feed and tracked events) since a time under draft rules, writing nothing (202 with the job)',
    description:
      "Body `{ rules: [draft rules, as a rule body], since }`. The job replays the kept change-feed events of the recordEvent drafts' types and the " +
      "stored tracked events of the trackedEvent drafts' names that occurred at or after `since`, merged in event time order, each draft applied as a " +
      "published rule is (repeatable, maxPerContact, cooldown between the events' times, the bounds). The result (GET /api/scoring/jobs/{id}) gives " +
      '`events`, `recordEvents`, `trackedEvents`, `applications` and per published point group how many contacts are in it now (`now`), would be ' +
      '(`wouldBe`), and would enter and leave, had the drafts been published at `since` (contact filters are evaluated over the contacts as they are now).',
  })
  @ApiEnvelope('job', ScoringJobRecordDto, { status: 202 })
  async whatIf(@Body() dto: WhatIfDto, @CurrentPrincipal() who: Principal) {
    return { job: await this.scoring.startWhatIf(dto, who) };
  }

  @Get('jobs/:id')
  @RequirePermission('scoring:read')
  @ApiOperation({ summary: 'A recompute or what-if run: status (queued, running, completed, failed), progress and result' })
  @ApiEnvelope('job', ScoringJobRecordDto)
  async job(@Param('id', IdPipe) id: number) {
    return { job: await this.scoring.getJob(id) };
  }
}
