import { Injectable } from '@nestjs/common';
import { Transactions, type Tx } from '../database/transactions.js';
import { auditFields, defineList, type ListQuery } from '../lists/list-spec.js';
import { type ListPage, paginate } from '../lists/list-sql.js';
import { type Settings, type Step, type Trigger, TRIGGER_TYPES, type UntilEvent, WORKFLOW_STATUSES } from './workflow-definition.js';
import { Workflow, WorkflowVersion } from './workflow.entity.js';

export const WORKFLOW_LIST_SPEC = defineList({
  name: 'workflows',
  sortable: ['id', 'name', 'status', 'version', 'createdAt', 'modifiedAt'],
  searchExpression: `lower(coalesce(w.name, '') || ' ' || coalesce(w.description, ''))`,
  filters: {
    status: { type: 'string', column: 'w.status', values: WORKFLOW_STATUSES },
    triggerType: { type: 'string', column: `(w.trigger->>'type')`, values: TRIGGER_TYPES },
  },
  fields: {
    id: { type: 'id', sql: 'w.id' },
    name: { type: 'string', sql: 'w.name' },
    description: { type: 'string', sql: 'w.description' },
    status: { type: 'enum', sql: 'w.status', values: WORKFLOW_STATUSES },
    version: { type: 'int', sql: 'w.version' },
    ...auditFields('w'),
  },
  properties: [
    'id',
    'name',
    'description',
    'status',
    'version',
    'trigger',
    'steps',
    'settings',
    'stats',
    'createdAt',
    'modifiedAt',
    'createdBy',
    'createdByUser',
    'modifiedBy',
    'modifiedByUser',
  ],
});

/** Every query of workflows and workflow_versions. */
@Injectable()
export class WorkflowsRepository {
  constructor(private readonly transactions: Transactions) {}

  private repo(tx?: Tx) {
    return this.transactions.manager(tx).getRepository(Workflow);
  }

  private versions(tx?: Tx) {
    return this.transactions.manager(tx).getRepository(WorkflowVersion);
  }

  create(): Workflow {
    return this.repo().create();
  }

  list(q: ListQuery): Promise<ListPage<Workflow>> {
    return paginate(this.repo().createQueryBuilder('w'), q, WORKFLOW_LIST_SPEC);
  }

  findRecord(id: number, tx?: Tx): Promise<Workflow | null> {
    return this.repo(tx).findOne({ where: { id } });
  }

  /** The row, locked until `tx` ends against other edits, deletes and enrolments (which take FOR SHARE). */
  findForUpdate(id: number, tx: Tx): Promise<Workflow | null> {
    return this.repo(tx).findOne({ where: { id }, lock: { mode: 'pessimistic_write' } });
  }

  /** The row, shared-locked until `tx` ends: an enrolment reads the status and version it enters, and an edit waits for it. */
  findForShare(id: number, tx: Tx): Promise<Workflow | null> {
    return this.repo(tx).findOne({ where: { id }, lock: { mode: 'pessimistic_read' } });
  }

  async save(w: Workflow, tx: Tx): Promise<number> {
    return (await this.repo(tx).save(w)).id;
  }

  async delete(id: number, tx: Tx): Promise<boolean> {
    return ((await this.repo(tx).delete({ id })).affected ?? 0) > 0;
  }

  /** Writes a version's definition: a new version, or the current one replaced (a draft's edits). */
  async putVersion(workflowId: number, version: number, d: { trigger: Trigger; steps: Step[]; settings: Settings }, at: Date, tx: Tx): Promise<void> {
    await tx.query(
      `INSERT INTO workflow_versions (workflow_id, version, trigger, steps, settings, created_at) VALUES ($1, $2, $3::jsonb, $4::jsonb, $5::jsonb, $6)
       ON CONFLICT (workflow_id, version) DO UPDATE SET trigger = EXCLUDED.trigger, steps = EXCLUDED.steps, settings = EXCLUDED.settings`,
      [workflowId, version, JSON.stringify(d.trigger), JSON.stringify(d.steps), JSON.stringify(d.settings), at],
    );
  }

  findVersion(workflowId: number, version: number, tx?: Tx): Promise<WorkflowVersion | null> {
    return this.versions(tx).findOne({ where: { workflowId, version } });
  }

  /** The active workflows whose trigger is of one of `types`. */
  async activeWithTrigger(types: readonly string[], tx?: Tx): Promise<Workflow[]> {
    return this.repo(tx)
      .createQueryBuilder('w')
      .where(`w.status = 'active'`)
      .andWhere(`(w.trigger->>'type') IN (:...types)`, { types })
      .orderBy('w.id')
      .getMany();
  }

  /** The active workflows that have a goal step in their current version (goals are checked when contacts change). */
  async activeWithGoals(tx?: Tx): Promise<Workflow[]> {
    return this.repo(tx)
      .createQueryBuilder('w')
      .where(`w.status IN ('active', 'paused')`)
      .andWhere(`w.steps @> '[{"type": "goal"}]'::jsonb`)
      .orderBy('w.id')
      .getMany();
  }

  /** The active workflows whose segment_entered or segment_exited trigger names the segment (read inside a membership change). */
  async activeOnSegment(segmentId: number, tx: Tx): Promise<Workflow[]> {
    return this.repo(tx)
      .createQueryBuilder('w')
      .where(`w.status = 'active'`)
      .andWhere(`(w.trigger->>'type') IN ('segment_entered', 'segment_exited')`)
      .andWhere(`(w.trigger->>'segmentId')::int = :segmentId`, { segmentId })
      .orderBy('w.id')
      .getMany();
  }

  /** Active schedule workflows whose tick is due, locked (others skip them) until `tx` ends. */
  async lockDueSchedules(now: Date, tx: Tx): Promise<Workflow[]> {
    return this.repo(tx)
      .createQueryBuilder('w')
      .where(`w.status = 'active' AND w.schedule_next_at <= :now`, { now })
      .orderBy('w.id')
      .setLock('pessimistic_write')
      .setOnLocked('skip_locked')
      .getMany();
  }

  async setScheduleNext(id: number, at: Date | null, tx: Tx): Promise<void> {
    await tx.query(`UPDATE workflows SET schedule_next_at = $2 WHERE id = $1`, [id, at]);
  }

  /** The trigger follower's cursor over the change feed, locked until `tx` ends; null when another process holds it. */
  async lockTriggerCursor(tx: Tx): Promise<{ lastSequence: number; prunedThrough: number; feedSequence: number } | null> {
    const rows: { last_sequence: string; pruned_through: string; feed: string }[] = await tx.query(
      `SELECT r.last_sequence, f.pruned_through, f.last_sequence AS feed FROM workflow_trigger_state r, event_feed_state f FOR UPDATE OF r SKIP LOCKED`,
    );
    return rows[0] ? { lastSequence: Number(rows[0].last_sequence), prunedThrough: Number(rows[0].pruned_through), feedSequence: Number(rows[0].feed) } : null;
  }

  async advanceTriggerCursor(sequence: number, tx: Tx): Promise<void> {
    await tx.query(`UPDATE workflow_trigger_state SET last_sequence = GREATEST(last_sequence, $1)`, [sequence]);
  }

  /**
   * The untilEvent wait steps enrollments may be waiting at: every version of the active and paused
   * workflows (waits keep counting while paused), with the step's key and its untilEvent.
   */
  async eventWaits(tx?: Tx): Promise<{ workflowId: number; version: number; stepKey: string; untilEvent: UntilEvent }[]> {
    const rows: { workflow_id: number; version: number; key: string; until_event: UntilEvent }[] = await this.transactions.handle(tx).query(
      `SELECT v.workflow_id, v.version, s->>'key' AS key, s->'untilEvent' AS until_event
         FROM workflows w JOIN workflow_versions v ON v.workflow_id = w.id, jsonb_array_elements(v.steps) s
        WHERE w.status IN ('active', 'paused') AND s ? 'untilEvent'
        ORDER BY 1, 2, 3`,
    );
    return rows.map((r) => ({ workflowId: r.workflow_id, version: r.version, stepKey: r.key, untilEvent: r.until_event }));
  }

  /** The tracked event names the workflows act on: active tracked_event triggers, and untilEvent waits of active and paused workflows. */
  async trackedNames(tx: Tx): Promise<string[]> {
    const rows: { name: string }[] = await tx.query(
      `SELECT trigger->>'name' AS name FROM workflows WHERE status = 'active' AND trigger->>'type' = 'tracked_event'
       UNION
       SELECT s->'untilEvent'->>'tracked' FROM workflows w JOIN workflow_versions v ON v.workflow_id = w.id, jsonb_array_elements(v.steps) s
        WHERE w.status IN ('active', 'paused') AND s->'untilEvent' ? 'tracked'`,
    );
    return rows.map((r) => r.name).filter((n) => typeof n === 'string');
  }

  /** The workflows among `ids`, by id (their names, for a contact's enrollments). */
  async namesByIds(ids: number[]): Promise<Map<number, string>> {
    if (!ids.length) return new Map();
    const rows: { id: number; name: string }[] = await this.transactions.db.query(`SELECT id, name FROM workflows WHERE id = ANY($1::int[])`, [ids]);
    return new Map(rows.map((r) => [r.id, r.name]));
  }
}
