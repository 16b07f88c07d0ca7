import { Injectable } from '@nestjs/common';
import { stampCreated, stampModified } from '../common/audit.js';
import { Clock } from '../common/clock.js';
import { AppError, conflict, fieldError, notFound, rejectNulls } from '../common/errors.js';
import type { Principal } from '../common/request.js';
import { Transactions, type Tx } from '../database/transactions.js';
import { EventsService } from '../events/events.service.js';
import { WebhooksService } from '../events/webhooks.service.js';
import { parseListQuery } from '../lists/list-query.js';
import { listEnvelope } from '../lists/list-sql.js';
import { EnrollmentStatsRepository } from './enrollment-stats.repository.js';
import { EnrollmentsRepository } from './enrollments.repository.js';
import { EnrollmentsService } from './enrollments.service.js';
import type { Definition, Step } from './workflow-definition.js';
import { SegmentEnrolment } from './segment-enrolment.js';
import { WorkflowEngine } from './workflow-engine.js';
import { statsSummary, toWorkflowRecord, type WorkflowRecord } from './workflow-records.js';
import { nextScheduleTick } from './workflow-schedule.js';
import { WorkflowTrackedFollower } from './workflow-tracked-follower.js';
import { WorkflowValidator } from './workflow-validation.js';
import type { CreateWorkflowDto, MigrateDto, UpdateWorkflowDto } from './workflow.dto.js';
import type { Workflow } from './workflow.entity.js';
import { WORKFLOW_LIST_SPEC, WorkflowsRepository } from './workflows.repository.js';

/**
 * Workflow definitions: CRUD with validation, versions (saving the definition of a workflow that
 * is not a draft creates a new version; enrollments stay on theirs until migrated), activation
 * (a segment_entered workflow enrols the segment's current members, set-based and in chunks, unless
 * enrollExisting is false; a schedule gets its next tick), deletion (409 while enrollments run,
 * unless forced), stats and migration.
 */
@Injectable()
export class WorkflowsService {
  constructor(
    private readonly workflows: WorkflowsRepository,
    private readonly enrollments: EnrollmentsRepository,
    private readonly enrollmentCounts: EnrollmentStatsRepository,
    private readonly enrolling: EnrollmentsService,
    private readonly validator: WorkflowValidator,
    private readonly engine: WorkflowEngine,
    private readonly transactions: Transactions,
    private readonly events: EventsService,
    private readonly webhooks: WebhooksService,
    private readonly tracked: WorkflowTrackedFollower,
    private readonly segmentEnrolment: SegmentEnrolment,
    private readonly clock: Clock,
  ) {}

  private async record(w: Workflow, tx?: Tx): Promise<WorkflowRecord> {
    const counts = await this.enrollmentCounts.countsByWorkflow([w.id], tx);
    return toWorkflowRecord(w, statsSummary(counts.get(w.id) ?? {}));
  }

  async list(query: Record<string, unknown>) {
    const q = parseListQuery(query, WORKFLOW_LIST_SPEC);
    const page = await this.workflows.list(q);
    const counts = await this.enrollmentCounts.countsByWorkflow(page.items.map((w) => w.id));
    return listEnvelope(
      q,
      'workflows',
      page,
      page.items.map((w) => toWorkflowRecord(w, statsSummary(counts.get(w.id) ?? {}))),
    );
  }

  async get(id: number, tx?: Tx): Promise<WorkflowRecord> {
    const w = await this.workflows.findRecord(id, tx);
    if (!w) throw notFound('Workflow', id);
    return this.record(w, tx);
  }

  async create(dto: CreateWorkflowDto, who: Principal): Promise<WorkflowRecord> {
    const def = await this.validator.check(dto);
    const w = this.workflows.create();
    this.assign(w, dto, true);
    w.status = dto.status ?? 'draft';
    w.version = 1;
    this.setDefinition(w, def);
    stampCreated(w, who);
    return this.transactions.run(async (tx) => {
      await this.bindWebhooks(def, [], w.name, who, tx);
      const id = await this.workflows.save(w, tx);
      await this.workflows.putVersion(id, 1, def, this.clock.now(), tx);
      if (w.status === 'active') await this.activated(w, tx);
      await this.tracked.declare(tx);
      const record = await this.get(id, tx);
      await this.events.record(tx, 'workflow.created', record);
      return record;
    });
  }

  async patch(id: number, dto: UpdateWorkflowDto, who: Principal): Promise<WorkflowRecord> {
    rejectNulls(dto, ['name', 'status', 'trigger', 'steps']);
    return this.transactions.run(async (tx) => {
      const w = await this.workflows.findForUpdate(id, tx);
      if (!w) throw notFound('Workflow', id);
      const def =
        dto.trigger !== undefined || dto.steps !== undefined || dto.settings !== undefined
          ? await this.validator.check({ trigger: dto.trigger ?? w.trigger, steps: dto.steps ?? w.steps, settings: dto.settings ?? w.settings })
          : null;
      return this.write(w, dto, def, false, who, tx);
    });
  }

  /**
   * Pause (active → paused) or resume (paused → active), as PATCH with the status does, but only from
   * the expected status, checked under the workflow's row lock (409 otherwise): the console's buttons,
   * whose parallel or stale posts must not activate a draft or an archived workflow.
   */
  async transition(id: number, from: 'active' | 'paused', to: 'active' | 'paused', who: Principal): Promise<WorkflowRecord> {
    return this.transactions.run(async (tx) => {
      const w = await this.workflows.findForUpdate(id, tx);
      if (!w) throw notFound('Workflow', id);
      if (w.status !== from) throw conflict(`Workflow ${id} is ${w.status}, not ${from}`, [{ field: 'status', message: `is ${w.status}` }]);
      return this.write(w, { status: to }, null, false, who, tx);
    });
  }

  async put(id: number, dto: CreateWorkflowDto, who: Principal): Promise<{ created: boolean; workflow: WorkflowRecord }> {
    const def = await this.validator.check(dto);
    const replaced = await this.transactions.run(async (tx) => {
      const w = await this.workflows.findForUpdate(id, tx);
      if (!w) return null;
      const body: UpdateWorkflowDto = {
        name: dto.name,
        description: dto.description,
        status: dto.status ?? 'draft',
        trigger: dto.trigger,
        steps: dto.steps,
        settings: dto.settings,
      };
      return this.write(w, body, def, true, who, tx);
    });
    if (!replaced) return { created: true, workflow: await this.create(dto, who) };
    return { created: false, workflow: replaced };
  }

  /**
   * The rules of an edit: a changed definition replaces the current version of a draft that never
   * enrolled anyone, and is a new version otherwise; becoming active runs the activation.
   */
  private async write(w: Workflow, dto: UpdateWorkflowDto, def: Definition | null, replace: boolean, who: Principal, tx: Tx): Promise<WorkflowRecord> {
    const before = await this.record(w, tx);
    const wasActive = w.status === 'active';
    this.assign(w, dto, replace);
    if (dto.status !== undefined) w.status = dto.status;
    if (def) await this.bindWebhooks(def, w.steps, w.name, who, tx);
    if (def && JSON.stringify({ t: def.trigger, s: def.steps, x: def.settings }) !== JSON.stringify({ t: w.trigger, s: w.steps, x: w.settings })) {
      const enrolled = before.stats.entered > 0;
      if (before.status === 'draft' && !enrolled) {
        await this.workflows.putVersion(w.id, w.version, def, this.clock.now(), tx);
        this.engine.forget(w.id, w.version);
      } else {
        w.version += 1;
        await this.workflows.putVersion(w.id, w.version, def, this.clock.now(), tx);
      }
      this.setDefinition(w, def);
    }
    if (w.status !== 'active') w.scheduleNextAt = null;
    else if (!wasActive) await this.activated(w, tx);
    else if (def) w.scheduleNextAt = nextScheduleTick(w, this.clock.now());
    stampModified(w, who);
    await this.workflows.save(w, tx);
    await this.tracked.declare(tx);
    const after = await this.record(w, tx);
    await this.events.recordUpdate(tx, 'workflow.updated', before, after);
    return after;
  }

  /**
   * A workflow becoming active: a segment_entered trigger enrols the segment's members (unless
   * enrollExisting is false; the first 5,000 now, the rest in the background: segment-enrolment.ts); a schedule's next tick.
   */
  private async activated(w: Workflow, tx: Tx): Promise<void> {
    w.scheduleNextAt = nextScheduleTick(w, this.clock.now());
    if (w.id !== undefined) await this.segmentEnrolment.start(w, tx);
    if (w.id !== undefined) await this.workflows.save(w, tx);
  }

  /**
   * Gives each `webhook { url }` step its signing subscription (step.webhookId): the one it names
   * when that still points at the URL, else the one a step of the previous definition had for the
   * URL, else a new one (no feed events; its secret from POST /api/webhooks/{id}/rotate-secret), in
   * the workflow's transaction.
   */
  private async bindWebhooks(def: Definition, previous: Step[], name: string, who: Principal, tx: Tx): Promise<void> {
    const known = new Map<string, number>();
    for (const s of previous) if (s.type === 'webhook' && s.url !== undefined && s.webhookId !== undefined) known.set(s.url, s.webhookId);
    for (const s of def.steps) {
      if (s.type !== 'webhook' || s.url === undefined) continue;
      const url = s.url;
      const candidates = [s.webhookId, known.get(url)].filter((x): x is number => x !== undefined);
      let id: number | undefined;
      for (const c of candidates) if ((await this.webhooks.urlOf(c, tx)) === url) id ??= c;
      id ??= await this.webhooks.createForWorkflow(url, `workflow "${name}", step ${s.key}`, who, tx);
      known.set(url, id);
      s.webhookId = id;
    }
  }

  private setDefinition(w: Workflow, def: Definition): void {
    w.trigger = def.trigger;
    w.steps = def.steps;
    w.settings = def.settings;
  }

  private assign(w: Workflow, dto: UpdateWorkflowDto, replace: boolean): void {
    if (dto.name !== undefined && dto.name !== null) {
      w.name = dto.name.trim();
      if (w.name === '') throw fieldError('name', 'must not be empty');
    }
    if (dto.description !== undefined || replace) {
      const d = dto.description;
      w.description = d === null || d === undefined || d.trim() === '' ? null : d.trim();
    }
  }

  /**
   * Deletes the workflow with its versions and enrollments. While enrollments run it is a 409,
   * unless `force`: they exit first (workflow.exited each). Of parallel deletes one succeeds.
   */
  async remove(id: number, force: boolean): Promise<WorkflowRecord> {
    return this.transactions.run(async (tx) => {
      const w = await this.workflows.findForUpdate(id, tx);
      if (!w) throw notFound('Workflow', id);
      const running = await this.enrollmentCounts.countRunning(id, tx);
      if (running && !force) {
        throw conflict(`Workflow ${id} has ${running} running enrollment(s); delete with ?force=true to exit them`, [
          { field: 'force', message: 'must be true to delete a workflow with running enrollments', running },
        ]);
      }
      if (running) await this.enrollments.endRunning(id, null, 'exited', 'workflow deleted', this.clock.now(), tx);
      const record = await this.record(w, tx);
      if (!(await this.workflows.delete(id, tx))) throw notFound('Workflow', id);
      await this.tracked.declare(tx);
      await this.events.record(tx, 'workflow.deleted', record);
      return record;
    });
  }

  /** GET /api/workflows/{id}/stats. */
  async stats(id: number) {
    const w = await this.workflows.findRecord(id);
    if (!w) throw notFound('Workflow', id);
    const { counts, medianConvertSeconds } = await this.enrollmentCounts.statusCounts(id);
    const summary = statsSummary(counts);
    const perStep = new Map((await this.enrollmentCounts.stepCounts(id)).map((r) => [r.step_key, r]));
    return {
      workflowId: id,
      ...summary,
      conversionRate: summary.entered ? summary.converted / summary.entered : 0,
      medianSecondsToConvert: medianConvertSeconds,
      steps: w.steps.map((s) => {
        const r = perStep.get(s.key);
        return { key: s.key, type: s.type, waiting: Number(r?.at ?? 0), completed: Number(r?.completed ?? 0), failed: Number(r?.failed ?? 0) };
      }),
    };
  }

  /**
   * Moves the running enrollments of `fromVersion` to the current version: each step key through
   * `map` (or unchanged), every resulting key a step of the current version (a 400 names the first
   * that is not). Waiting enrollments keep their due time.
   */
  async migrate(id: number, dto: MigrateDto) {
    const map = dto.map ?? {};
    for (const [k, v] of Object.entries(map)) if (typeof v !== 'string') throw fieldError(`map.${k}`, 'must be a step key');
    return this.transactions.run(async (tx) => {
      const w = await this.workflows.findForUpdate(id, tx);
      if (!w) throw notFound('Workflow', id);
      if (dto.fromVersion === w.version) throw fieldError('fromVersion', `is the current version (${w.version}): nothing to migrate`);
      if (!(await this.workflows.findVersion(id, dto.fromVersion, tx))) throw fieldError('fromVersion', `version ${dto.fromVersion} does not exist`);
      const keys = new Map(w.steps.map((s) => [s.key, s.type]));
      for (const k of Object.keys(map)) {
        const type = keys.get(map[k]);
        if (!type || type === 'goal') throw fieldError(`map.${k}`, `"${map[k]}" is not a step of version ${w.version}`);
      }
      for (const k of await this.enrollments.runningStepKeys(id, dto.fromVersion, tx)) {
        const target = map[k] ?? k;
        const type = keys.get(target);
        if (!type || type === 'goal')
          throw new AppError('validation_failed', `map: enrollments are at step "${k}", which version ${w.version} does not have; map it to one of its steps`, [
            { field: `map.${k}`, message: `is required: "${k}" is not a step of version ${w.version}` },
          ]);
      }
      const migrated = await this.enrollments.migrate(id, dto.fromVersion, w.version, map, tx);
      if (migrated) this.enrolling.notify();
      return { migrated, fromVersion: dto.fromVersion, toVersion: w.version };
    });
  }
}
