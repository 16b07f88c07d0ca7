import { Controller, Get, Param, Post, Query, Req, Res, UseFilters, UseGuards } from '@nestjs/common';
import { ApiExcludeController } from '@nestjs/swagger';
import type { Response } from 'express';
import { IdPipe } from '../common/id.pipe.js';
import { Consumes } from '../server/content-type.guard.js';
import { WorkflowsService } from '../workflows/workflows.service.js';
import { chromeOf, FORM, mayDo, requirePermission, seeOther, sendPage } from './console-http.js';
import { workflowPage, workflowsPage } from './console-workflows.views.js';
import { ConsoleExceptionFilter } from './console.filter.js';
import { ConsoleGuard, type ConsoleRequest, SignedIn, signedIn } from './console.guard.js';
import { pageParam } from './console.views.js';
import type { GraphStep } from './workflow-graph.js';

const WORKFLOWS_PER_PAGE = 20;
const done = (v: unknown) => (typeof v === 'string' ? v : undefined);

/**
 * Workflows in the console, through WorkflowsService as the API: the list (GET /api/workflows,
 * workflows:read), a workflow with its step graph and per-step counts (GET /api/workflows/{id} and
 * its stats), pause and resume (as PATCH /api/workflows/{id} with the status, from the status the
 * button was shown for: 409 otherwise; workflows:write).
 */
@ApiExcludeController()
@Controller('account/workflows')
@SignedIn()
@UseGuards(ConsoleGuard)
@UseFilters(ConsoleExceptionFilter)
export class ConsoleWorkflowsController {
  constructor(private readonly workflows: WorkflowsService) {}

  @Get()
  async list(@Req() req: ConsoleRequest, @Query('page') page: unknown, @Res() res: Response): Promise<void> {
    requirePermission(signedIn(req).principal, 'workflows:read');
    const n = pageParam(page);
    const { total, workflows } = await this.workflows.list({ page: String(n), limit: String(WORKFLOWS_PER_PAGE), orderBy: 'id', orderByDir: 'desc' });
    sendPage(res, 200, workflowsPage(chromeOf(req), { workflows, total, page: n, pageSize: WORKFLOWS_PER_PAGE }));
  }

  @Get(':id')
  async show(@Req() req: ConsoleRequest, @Param('id', IdPipe) id: number, @Query('done') notice: unknown, @Res() res: Response): Promise<void> {
    const who = signedIn(req).principal;
    requirePermission(who, 'workflows:read');
    const workflow = await this.workflows.get(id);
    const stats = await this.workflows.stats(id);
    const counts = new Map(stats.steps.map((s) => [s.key, s]));
    const steps: GraphStep[] = (workflow.steps as unknown as GraphStep[]).map((s) => ({
      ...s,
      waiting: counts.get(s.key)?.waiting ?? 0,
      completed: counts.get(s.key)?.completed ?? 0,
      failed: counts.get(s.key)?.failed ?? 0,
    }));
    sendPage(res, 200, workflowPage(chromeOf(req), { workflow, steps, mayWrite: mayDo(who, 'workflows:write'), done: done(notice) }));
  }

  @Post(':id/pause')
  @Consumes(FORM)
  async pause(@Req() req: ConsoleRequest, @Param('id', IdPipe) id: number, @Res() res: Response): Promise<void> {
    const who = signedIn(req).principal;
    requirePermission(who, 'workflows:write');
    await this.workflows.transition(id, 'active', 'paused', who);
    seeOther(res, `/account/workflows/${id}?done=paused`);
  }

  @Post(':id/resume')
  @Consumes(FORM)
  async resume(@Req() req: ConsoleRequest, @Param('id', IdPipe) id: number, @Res() res: Response): Promise<void> {
    const who = signedIn(req).principal;
    requirePermission(who, 'workflows:write');
    await this.workflows.transition(id, 'paused', 'active', who);
    seeOther(res, `/account/workflows/${id}?done=resumed`);
  }
}
