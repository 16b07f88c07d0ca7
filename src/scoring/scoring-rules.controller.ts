import { Body, Controller, Delete, Get, HttpCode, Param, Patch, Post, Put, Query } from '@nestjs/common';
import { ApiOperation, ApiTags } from '@nestjs/swagger';
import { CurrentPrincipal } from '../auth/current-principal.decorator.js';
import { RequirePermission } from '../auth/permissions.js';
import { IdPipe } from '../common/id.pipe.js';
import { ApiEnvelope } from '../common/openapi.js';
import type { Principal } from '../common/request.js';
import { ApiListQuery, ApiListSearch } from '../lists/list.openapi.js';
import { ListSearchDto, searchQuery } from '../lists/list-search.dto.js';
import { CreateOrReplace, putOutcome } from '../server/put-status.js';
import { CreateScoringRuleDto, ScoringRuleRecordDto, UpdateScoringRuleDto } from './scoring.dto.js';
import { SCORING_RULE_LIST_SPEC } from './scoring-rules.repository.js';
import { ScoringRulesService } from './scoring-rules.service.js';

const RULES =
  '`on` names exactly one of `recordEvent` (a change-feed event type) and `trackedEvent` (a tracked event name), with an optional `filter` ' +
  '(over the contact for recordEvent, over `properties.<name>` for trackedEvent); a filter that does not compile, an unknown event type or a delta of 0 ' +
  'or beyond ±1,000,000 is a 400. Published rules are applied within seconds of their events, exactly once per rule and event.';

/** Served under both spellings, /api/scoring-rules and /api/scoring_rules, by the same handlers. */
@ApiTags('scoring')
@Controller(['api/scoring-rules', 'api/scoring_rules'])
export class ScoringRulesController {
  constructor(private readonly rules: ScoringRulesService) {}

  @Get()
  @RequirePermission('scoring:read')
  @ApiOperation({
    summary: 'List scoring rules',
    description: 'List parameters: search (name, description, event), page, limit, orderBy, orderByDir, filter; filter isPublished.',
  })
  @ApiEnvelope('scoringRules', ScoringRuleRecordDto, { list: true })
  @ApiListQuery(SCORING_RULE_LIST_SPEC)
  list(@Query() query: Record<string, unknown>) {
    return this.rules.list(query);
  }

  @Post('search')
  @HttpCode(200)
  @RequirePermission('scoring:read')
  @ApiOperation({
    summary: 'Search scoring rules: the list with its parameters as a JSON body (filter in its JSON form)',
    description: 'Answers what the GET list answers.',
  })
  @ApiListSearch('scoringRules', ScoringRuleRecordDto, SCORING_RULE_LIST_SPEC)
  search(@Body() body: ListSearchDto) {
    return this.rules.list(searchQuery(body));
  }

  @Post(['new', '/'])
  @HttpCode(201)
  @RequirePermission('scoring:write')
  @ApiOperation({ summary: 'Create a scoring rule', description: RULES })
  @ApiEnvelope('scoringRule', ScoringRuleRecordDto, { status: 201 })
  async create(@Body() dto: CreateScoringRuleDto, @CurrentPrincipal() who: Principal) {
    return { scoringRule: await this.rules.create(dto, who) };
  }

  @Get(':id')
  @RequirePermission('scoring:read')
  @ApiOperation({ summary: 'Get a scoring rule' })
  @ApiEnvelope('scoringRule', ScoringRuleRecordDto)
  async get(@Param('id', IdPipe) id: number) {
    return { scoringRule: await this.rules.get(id) };
  }

  @Patch([':id/edit', ':id'])
  @RequirePermission('scoring:write')
  @ApiOperation({ summary: 'Edit a scoring rule: changes only the supplied properties; 404 when the id does not exist', description: RULES })
  @ApiEnvelope('scoringRule', ScoringRuleRecordDto)
  async patch(@Param('id', IdPipe) id: number, @Body() dto: UpdateScoringRuleDto, @CurrentPrincipal() who: Principal) {
    return { scoringRule: await this.rules.patch(id, dto, who) };
  }

  @Put([':id/edit', ':id'])
  @CreateOrReplace()
  @RequirePermission('scoring:write')
  @ApiOperation({ summary: 'Replace a scoring rule (200), or create one with a new id when the id does not exist (201)', description: RULES })
  @ApiEnvelope('scoringRule', ScoringRuleRecordDto)
  @ApiEnvelope('scoringRule', ScoringRuleRecordDto, { status: 201 })
  async put(@Param('id', IdPipe) id: number, @Body() dto: CreateScoringRuleDto, @CurrentPrincipal() who: Principal) {
    const { created, scoringRule } = await this.rules.put(id, dto, who);
    return putOutcome(created, { scoringRule });
  }

  @Delete([':id/delete', ':id'])
  @RequirePermission('scoring:delete')
  @ApiOperation({ summary: 'Delete a scoring rule; answers it as it was (the points it gave stay in the ledger)' })
  @ApiEnvelope('scoringRule', ScoringRuleRecordDto)
  async remove(@Param('id', IdPipe) id: number) {
    return { scoringRule: await this.rules.remove(id) };
  }
}
