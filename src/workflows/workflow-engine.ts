import { Injectable, Logger } from '@nestjs/common';
import { QueryFailedError } from 'typeorm';
import { Clock } from '../common/clock.js';
import { AppError } from '../common/errors.js';
import type { Principal } from '../common/request.js';
import { Transactions, type Tx } from '../database/transactions.js';
import { EventsService } from '../events/events.service.js';
import { WebhooksService } from '../events/webhooks.service.js';
import { type Advance, EnrollmentsRepository, type StepRun } from './enrollments.repository.js';
import type { EnrollmentStatus, Settings, Step } from './workflow-definition.js';
import { toEnrollmentRecord } from './workflow-records.js';
import { type GroupOutcome, SET_BASED_STEPS, type StepContext, StepEffects, type StepResult } from './workflow-steps.js';
import type { Workflow, WorkflowEnrollment } from './workflow.entity.js';
import { WorkflowsRepository } from './workflows.repository.js';

/** Steps one claim runs in a row for one enrollment before letting it go (a loop of waits that are already over). */
const MAX_STEPS_PER_CLAIM = 100;
/**
 * Steps of one enrollment run in one transaction, one after another (each still behind its own
 * savepoint): fewer commits, and the chain's effects commit together or not at all.
 */
export const STEPS_PER_TRANSACTION = 10;
/** A step that failed for a passing reason is tried again this many times, then the enrollment fails. */
export const MAX_ATTEMPTS = 5;

/** A version's definition as the engine reads it (immutable once a newer version exists). */
export interface VersionDefinition {
  steps: Step[];
  settings: Settings;
}

/** What the steps of one transaction share: the enrollment as the last step left it, and its workflow. */
interface Chain {
  enrollment?: WorkflowEnrollment;
  workflow?: Workflow;
}

/** At most this many enrollments of a group run in one set-based statement (the contacts' batch path's limit). */
export const GROUP_MAX = 500;

/** What the rounds of one batch transaction share: the enrollments as the last round left them, and their workflows. */
interface BatchChain {
  enrollments: Map<number, WorkflowEnrollment>;
  workflows: Map<number, Workflow | null>;
  /** Positions of enrollments that went on at once, written when the transaction's rounds end (one UPDATE, not one a round). */
  positions: Map<number, Advance>;
}

/** One enrollment of a batch round at its step. */
interface Member {
  e: WorkflowEnrollment;
  def: VersionDefinition;
  step: Step;
  ctx: StepContext;
}

/** What one batch round writes: history rows and positions (one statement), events (one statement). */
interface RoundWrites {
  advances: { id: number; run: StepRun; a: Advance }[];
  events: Parameters<EventsService['recordMany']>[1];
  /** Enrollments due again at once (the next round runs them). */
  again: number[];
}

/** What became of one claimed enrollment. */
export type ProcessOutcome = 'ended' | 'waiting' | 'released' | 'lost' | 'retry';

/**
 * A step's error that is the step's own failure (a 4xx of a feature: the contact or campaign is
 * gone, an invalid number, a custom field value refused; a constraint or data error of the
 * database), as opposed to a passing one (the connection, a deadlock, the queue unreachable), which
 * is retried.
 */
export function isStepFailure(e: unknown): boolean {
  if (e instanceof AppError) return e.status < 500;
  if (e instanceof QueryFailedError) {
    const code = (e.driverError as { code?: string } | undefined)?.code ?? '';
    return code.startsWith('23') || code.startsWith('22');
  }
  return false;
}

/**
 * Runs claimed enrollments' steps. The runner hands it batches (processBatch: the steps of a batch
 * run set-based, grouped by workflow version and step; docs/decisions/workflow-execution.md);
 * process() runs one enrollment (the fallback after a passing failure of a batch).
 *
 * process() runs the steps of one claimed enrollment, up to STEPS_PER_TRANSACTION in one transaction. Each step: the enrollment row is
 * locked and checked to be still ours (the claim token: a claim whose lease passed may have been
 * taken over), the workflow's goals are checked, the step's effect is written, then its history row,
 * its event and the enrollment's new position, so a step's effect commits exactly when the
 * enrollment moves past it. A step's own failure rolls its effect back (a savepoint) and ends the
 * enrollment `failed` with the error; a passing failure rolls everything back and the claim is
 * retried later.
 */
@Injectable()
export class WorkflowEngine {
  private readonly logger = new Logger('Workflows');
  private readonly versions = new Map<string, VersionDefinition>();

  constructor(
    private readonly transactions: Transactions,
    private readonly enrollments: EnrollmentsRepository,
    private readonly workflows: WorkflowsRepository,
    private readonly effects: StepEffects,
    private readonly events: EventsService,
    private readonly webhooks: WebhooksService,
    private readonly clock: Clock,
  ) {}

  /** A version's definition (cached: a version is only ever replaced while its workflow is a draft without enrollments). */
  async version(workflowId: number, version: number, tx?: Tx): Promise<VersionDefinition | null> {
    const key = `${workflowId}:${version}`;
    const hit = this.versions.get(key);
    if (hit) return hit;
    const v = await this.workflows.findVersion(workflowId, version, tx);
    if (!v) return null;
    const def = { steps: v.steps, settings: v.settings };
    this.versions.set(key, def);
    return def;
  }

  /** Forgets a cached version (a draft's definition replaced in place). */
  forget(workflowId: number, version: number): void {
    this.versions.delete(`${workflowId}:${version}`);
  }

  /** Runs the claimed enrollment's due steps until it waits, ends, is not due, or MAX_STEPS_PER_CLAIM ran. */
  async process(id: number, token: string): Promise<ProcessOutcome> {
    for (let i = 0; i < MAX_STEPS_PER_CLAIM; i += STEPS_PER_TRANSACTION) {
      const webhooks = new Set<number>();
      let outcome: ProcessOutcome | 'continue';
      try {
        outcome = await this.transactions.run(async (tx) => {
          const chain: Chain = {};
          for (let j = 0; j < STEPS_PER_TRANSACTION; j++) {
            const o = await this.step(id, token, webhooks, tx, chain);
            if (o !== 'continue') return o;
          }
          return 'continue' as const;
        });
      } catch (e) {
        return this.passingFailure(id, token, e);
      }
      if (webhooks.size) await this.webhooks.queueDrains([...webhooks]);
      if (outcome !== 'continue') {
        if (outcome !== 'lost' && outcome !== 'ended') await this.enrollments.release(id, token);
        return outcome;
      }
    }
    await this.enrollments.release(id, token);
    return 'released';
  }

  /**
   * Runs a claimed batch of enrollments set-based, in rounds: each round locks the batch's
   * enrollments still held by `token` (one statement), checks the workflows' goals for all of them
   * (one statement per goal), groups them by (workflow, version, step key) and runs each group's
   * step as one set-based run (StepEffects.runMany, behind its own savepoint), then writes every
   * history row and position in one statement and every workflow.* event in one. Up to
   * STEPS_PER_TRANSACTION rounds share a transaction: the effects commit with the enrollments'
   * moves past them, together or not at all. A group whose set-based run fails is rolled back to its
   * savepoint and its enrollments run one by one, each behind its own savepoint, so an enrollment's
   * own failure marks only it failed. A passing failure (the connection, a deadlock) rolls the
   * transaction back and the enrollments left run one by one through process(), which retries each
   * with backoff. Claims are let go at the end (those that ended no longer run anyway).
   */
  async processBatch(ids: number[], token: string): Promise<void> {
    let live = ids;
    for (let i = 0; i < MAX_STEPS_PER_CLAIM && live.length; i += STEPS_PER_TRANSACTION) {
      const webhooks = new Set<number>();
      const running = live;
      try {
        live = await this.transactions.run(async (tx) => {
          const chain: BatchChain = { enrollments: new Map(), workflows: new Map(), positions: new Map() };
          let current = running;
          for (let j = 0; j < STEPS_PER_TRANSACTION && current.length; j++) current = await this.round(current, token, webhooks, tx, chain);
          await this.enrollments.advanceMany(
            [],
            [...chain.positions].map(([id, a]) => ({ id, a })),
            tx,
          );
          return current;
        });
      } catch (e) {
        this.logger.warn({
          msg: 'workflow batch failed for a passing reason; its enrollments run one by one',
          enrollments: running.length,
          err: e instanceof Error ? e.message : String(e),
        });
        for (const id of running) await this.process(id, token);
        break;
      }
      if (webhooks.size) await this.webhooks.queueDrains([...webhooks]);
    }
    await this.enrollments.releaseMany(ids, token);
  }

  /** One step of each enrollment among `ids` (see processBatch); answers those due again at once. */
  private async round(ids: number[], token: string, webhooks: Set<number>, tx: Tx, chain: BatchChain): Promise<number[]> {
    const unlocked = ids.filter((id) => !chain.enrollments.has(id));
    for (const e of await this.enrollments.lockClaimedMany(unlocked, token, tx)) chain.enrollments.set(Number(e.id), e);
    const now = this.clock.now();
    const writes: RoundWrites = { advances: [], events: [], again: [] };
    const groups = new Map<string, Member[]>();
    for (const id of ids) {
      const e = chain.enrollments.get(id);
      // Lost (another runner took the claim over), not due, or its workflow not active: left as it is.
      if (!e || (e.nextAt && e.nextAt.getTime() > now.getTime())) continue;
      let w = chain.workflows.get(e.workflowId);
      if (w === undefined) chain.workflows.set(e.workflowId, (w = await this.workflows.findRecord(e.workflowId, tx)));
      if (!w || w.status !== 'active') continue;
      const def = await this.version(e.workflowId, e.version, tx);
      const step = def?.steps.find((s) => s.key === e.stepKey);
      if (!def || !step) {
        this.ended(writes, e, 'failed', `step "${e.stepKey}" is not in version ${e.version}`, null, now);
        continue;
      }
      const ctx = stepContext(e, w, def.settings, now, webhooks);
      const key = `${e.workflowId}:${e.version}:${step.key}`;
      const group = groups.get(key) ?? [];
      if (!group.length) groups.set(key, group);
      group.push({ e, def, step, ctx });
    }
    await this.convertGoals(groups, writes, now, tx);
    for (const members of groups.values()) {
      for (let k = 0; k < members.length; k += GROUP_MAX) {
        const part = members.slice(k, k + GROUP_MAX);
        const outcomes = await this.runGroup(part, tx);
        for (const m of part) {
          const o = outcomes.get(m.ctx.enrollmentId);
          if (!o) throw new Error(`no outcome for enrollment ${m.ctx.enrollmentId} at step ${m.step.key}`);
          if ('failure' in o) {
            const message = o.failure instanceof Error ? o.failure.message : String(o.failure);
            this.ended(writes, m.e, 'failed', message.slice(0, 2000), { key: m.step.key, type: m.step.type }, now);
          } else this.applied(writes, m, o.result);
        }
      }
    }
    // History rows now; positions now when the enrollment waits or ended (its running index entry goes
    // at once), at the transaction's end when it goes on (the next round moves it again).
    const moves: { id: number; a: Advance }[] = [];
    for (const x of writes.advances) {
      if (x.a.status === 'active') chain.positions.set(x.id, x.a);
      else {
        chain.positions.delete(x.id);
        moves.push({ id: x.id, a: x.a });
      }
    }
    await this.enrollments.advanceMany(
      writes.advances.map((x) => ({ id: x.id, run: x.run, seq: x.a.stepSeq })),
      moves,
      tx,
    );
    if (writes.events.length) await this.events.recordMany(tx, writes.events);
    return writes.again;
  }

  /** Ends `converted` the members whose contact matches a goal of their version (checked before each step), one statement per goal. */
  private async convertGoals(groups: Map<string, Member[]>, writes: RoundWrites, now: Date, tx: Tx): Promise<void> {
    const byVersion = new Map<string, { goals: Step[]; keys: string[] }>();
    for (const [key, members] of groups) {
      const { e, def } = members[0];
      const v = `${e.workflowId}:${e.version}`;
      const entry = byVersion.get(v);
      if (entry) entry.keys.push(key);
      else {
        const goals = def.steps.filter((s) => s.type === 'goal');
        if (goals.length) byVersion.set(v, { goals, keys: [key] });
      }
    }
    for (const { goals, keys } of byVersion.values()) {
      const converted = new Set<number>();
      for (const goal of goals) {
        const rest = keys.flatMap((k) => (groups.get(k) ?? []).filter((m) => !converted.has(m.e.contactId)));
        if (!rest.length) break;
        const matched = await this.effects.matchingContacts(
          rest.map((m) => m.e.contactId),
          goal.filter,
          now,
          tx,
        );
        for (const m of rest) {
          if (!matched.has(m.e.contactId)) continue;
          converted.add(m.e.contactId);
          this.ended(writes, m.e, 'converted', null, { key: goal.key, type: 'goal' }, now);
        }
      }
      if (!converted.size) continue;
      for (const k of keys) {
        const left = (groups.get(k) ?? []).filter((m) => !converted.has(m.e.contactId));
        if (left.length) groups.set(k, left);
        else groups.delete(k);
      }
    }
  }

  /**
   * A group's step: set-based behind a savepoint when its type has a set-based run; when that
   * fails (or the type has none), each enrollment behind its own savepoint, its own failure its alone.
   */
  private async runGroup(part: Member[], tx: Tx): Promise<Map<number, GroupOutcome>> {
    const step = part[0].step;
    if (SET_BASED_STEPS.has(step.type) && !step.split) {
      try {
        return await this.transactions.run(
          (inner) =>
            this.effects.runMany(
              step,
              part.map((m) => m.ctx),
              inner,
            ),
          tx,
        );
      } catch (e) {
        this.logger.debug({ msg: 'set-based step failed; its enrollments run one by one', step: step.key, err: e instanceof Error ? e.message : String(e) });
      }
    }
    const out = new Map<number, GroupOutcome>();
    // Steps that write nothing (a wait, an exit, a split) need no savepoint.
    const pure = step.type === 'wait' || step.type === 'exit' || step.type === 'goal' || (step.type === 'branch' && !!step.split);
    for (const m of part) {
      try {
        const result = pure ? await this.effects.run(m.step, m.ctx, tx) : await this.transactions.run((inner) => this.effects.run(m.step, m.ctx, inner), tx);
        out.set(m.ctx.enrollmentId, { result });
      } catch (err) {
        if (!isStepFailure(err)) throw err;
        out.set(m.ctx.enrollmentId, { failure: err as Error });
      }
    }
    return out;
  }

  /** apply() of a batch round: the step's history row, position and events, written with the round's. */
  private applied(writes: RoundWrites, m: Member, r: StepResult): void {
    const { e, step, ctx } = m;
    if (r.kind === 'exit') {
      this.ended(writes, e, 'exited', null, { key: step.key, type: step.type }, ctx.now);
      return;
    }
    const outcome = r.kind === 'wait' ? 'waiting' : r.outcome;
    let a: Advance;
    if (r.kind === 'wait') a = { status: 'waiting', stepKey: step.key, nextAt: r.until, endedAt: null, error: null, stepSeq: ctx.seq };
    else if (r.next === undefined) a = { status: 'completed', stepKey: step.key, nextAt: null, endedAt: ctx.now, error: null, stepSeq: ctx.seq };
    else a = { status: 'active', stepKey: r.next, nextAt: ctx.now, endedAt: null, error: null, stepSeq: ctx.seq };
    writes.advances.push({ id: ctx.enrollmentId, run: { stepKey: step.key, stepType: step.type, outcome, detail: r.detail, at: ctx.now }, a });
    const record = toEnrollmentRecord(Object.assign(e, a, { wokenBy: null, attempts: 0 }));
    writes.events.push({ type: 'workflow.step_completed', data: { enrollment: record, step: { key: step.key, type: step.type, outcome, detail: r.detail } } });
    if (a.status === 'completed') writes.events.push({ type: 'workflow.completed', data: record });
    else if (a.status === 'active') writes.again.push(ctx.enrollmentId);
  }

  /** end() of a batch round. */
  private ended(
    writes: RoundWrites,
    e: WorkflowEnrollment,
    status: Extract<EnrollmentStatus, 'failed' | 'exited' | 'converted'>,
    error: string | null,
    step: { key: string; type: string } | null,
    now: Date,
  ): void {
    const a: Advance = { status, stepKey: e.stepKey, nextAt: null, endedAt: now, error, stepSeq: e.stepSeq + 1 };
    const run = { stepKey: step?.key ?? e.stepKey ?? '', stepType: step?.type ?? 'unknown', outcome: status, detail: error ? { error } : null, at: now };
    writes.advances.push({ id: Number(e.id), run, a });
    writes.events.push({ type: `workflow.${status}`, data: toEnrollmentRecord(Object.assign(e, a)) });
  }

  private async passingFailure(id: number, token: string, e: unknown): Promise<ProcessOutcome> {
    const message = e instanceof Error ? e.message : String(e);
    const attempts = await this.enrollments.retryLater(id, token);
    this.logger.warn({ msg: 'workflow step failed for a passing reason; retried later', enrollmentId: id, attempts, err: message });
    if (attempts >= MAX_ATTEMPTS) await this.failAfterAttempts(id, `gave up after ${attempts} attempts: ${message}`);
    return 'retry';
  }

  /**
   * One step in `tx`; 'continue' when the enrollment is due again at once. The chain keeps the
   * enrollment (locked by the first step of the transaction, changed by each) and its workflow for
   * the next steps of the same transaction.
   */
  private async step(id: number, token: string, webhooks: Set<number>, tx: Tx, chain: Chain): Promise<ProcessOutcome | 'continue'> {
    const e = chain.enrollment ?? (await this.enrollments.lockClaimed(id, token, tx));
    if (!e) return 'lost';
    const now = this.clock.now();
    if (e.nextAt && e.nextAt.getTime() > now.getTime()) return 'released';
    const w = chain.workflow ?? (await this.workflows.findRecord(e.workflowId, tx));
    if (!w || w.status !== 'active') return 'released';
    chain.enrollment = e;
    chain.workflow = w;
    const def = await this.version(e.workflowId, e.version, tx);
    const step = def?.steps.find((s) => s.key === e.stepKey);
    if (!def || !step) {
      await this.end(e, 'failed', `step "${e.stepKey}" is not in version ${e.version}`, null, now, tx);
      return 'ended';
    }
    for (const goal of def.steps.filter((s) => s.type === 'goal')) {
      if (await this.effects.matches(e.contactId, goal.filter, now, tx)) {
        await this.end(e, 'converted', null, { key: goal.key, type: 'goal' }, now, tx);
        return 'ended';
      }
    }
    const ctx = stepContext(e, w, def.settings, now, webhooks);
    let result: StepResult;
    try {
      // A savepoint: a failing step's partial effects roll back, the enrollment's failure is still recorded.
      result = await this.transactions.run((inner) => this.effects.run(step, ctx, inner), tx);
    } catch (err) {
      if (!isStepFailure(err)) throw err;
      const message = err instanceof Error ? err.message : String(err);
      await this.end(e, 'failed', message.slice(0, 2000), { key: step.key, type: step.type }, now, tx);
      return 'ended';
    }
    return this.apply(e, step, result, ctx, tx);
  }

  /** Writes a step's result: history, event, and the enrollment's next position. */
  private async apply(e: WorkflowEnrollment, step: Step, r: StepResult, ctx: StepContext, tx: Tx): Promise<ProcessOutcome | 'continue'> {
    const now = ctx.now;
    if (r.kind === 'exit') {
      await this.end(e, 'exited', null, { key: step.key, type: step.type }, now, tx);
      return 'ended';
    }
    const outcome = r.kind === 'wait' ? 'waiting' : r.outcome;
    let a: Advance;
    if (r.kind === 'wait') a = { status: 'waiting', stepKey: step.key, nextAt: r.until, endedAt: null, error: null, stepSeq: ctx.seq };
    else if (r.next === undefined) a = { status: 'completed', stepKey: step.key, nextAt: null, endedAt: now, error: null, stepSeq: ctx.seq };
    else a = { status: 'active', stepKey: r.next, nextAt: now, endedAt: null, error: null, stepSeq: ctx.seq };
    await this.enrollments.advance(ctx.enrollmentId, { stepKey: step.key, stepType: step.type, outcome, detail: r.detail, at: now }, a, tx);
    const record = toEnrollmentRecord(Object.assign(e, a, { wokenBy: null, attempts: 0 }));
    await this.events.record(tx, 'workflow.step_completed', { enrollment: record, step: { key: step.key, type: step.type, outcome, detail: r.detail } });
    if (a.status === 'completed') {
      await this.events.record(tx, 'workflow.completed', record);
      return 'ended';
    }
    return a.status === 'waiting' ? 'waiting' : 'continue';
  }

  /** Ends the enrollment (failed, exited or converted) with its history row and event. */
  private async end(
    e: WorkflowEnrollment,
    status: Extract<EnrollmentStatus, 'failed' | 'exited' | 'converted'>,
    error: string | null,
    step: { key: string; type: string } | null,
    now: Date,
    tx: Tx,
  ): Promise<void> {
    const seq = e.stepSeq + 1;
    const a: Advance = { status, stepKey: e.stepKey, nextAt: null, endedAt: now, error, stepSeq: seq };
    const run = { stepKey: step?.key ?? e.stepKey ?? '', stepType: step?.type ?? 'unknown', outcome: status, detail: error ? { error } : null, at: now };
    await this.enrollments.advance(Number(e.id), run, a, tx);
    await this.events.record(tx, `workflow.${status}`, toEnrollmentRecord(Object.assign(e, a)));
  }

  /** Ends an enrollment failed after MAX_ATTEMPTS passing failures (its claim is no longer held). */
  async failAfterAttempts(id: number, message: string): Promise<void> {
    await this.transactions.run(async (tx) => {
      const e = await this.enrollments.lockById(id, tx);
      if (!e || (e.status !== 'active' && e.status !== 'waiting')) return;
      const w = await this.workflows.findRecord(e.workflowId, tx);
      const step = w ? (await this.version(e.workflowId, e.version, tx))?.steps.find((s) => s.key === e.stepKey) : undefined;
      await this.end(e, 'failed', message.slice(0, 2000), step ? { key: step.key, type: step.type } : null, this.clock.now(), tx);
    });
  }
}

/** Who a workflow's changes are made by: the workflow's author, named after the workflow. */
/** What a step of enrollment `e` (of workflow `w`, at its version's settings) runs with, at `now`. */
function stepContext(e: WorkflowEnrollment, w: Workflow, settings: Settings, now: Date, webhooks: Set<number>): StepContext {
  return {
    enrollmentId: Number(e.id),
    workflowId: w.id,
    workflowName: w.name,
    contactId: e.contactId,
    waiting: e.status === 'waiting',
    woken: e.wokenBy,
    seq: e.stepSeq + 1,
    settings,
    now,
    who: systemPrincipal(w),
    webhooks,
  };
}

export function systemPrincipal(w: Workflow): Principal {
  return {
    userId: w.createdBy ?? 0,
    userName: `workflow ${w.id}`,
    plan: 'enterprise',
    team: null,
    apiTokenId: 0,
    permissions: new Set(['*']),
    kind: 'api_token',
  } as unknown as Principal;
}
