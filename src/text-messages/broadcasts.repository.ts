import { Injectable } from '@nestjs/common';
import { auditFields, defineList, type ListQuery } from '../lists/list-spec.js';
import { type ListPage, paginate } from '../lists/list-sql.js';
import { type Db, returning, Transactions, type Tx } from '../database/transactions.js';
import { type Audience, Broadcast, BROADCAST_STATUSES } from './broadcast.entity.js';

export const BROADCAST_LIST_SPEC = defineList({
  name: 'broadcasts',
  sortable: ['id', 'name', 'status', 'scheduledFor', 'createdAt', 'modifiedAt'],
  searchExpression: `lower(coalesce(b.name, '') || ' ' || b.content)`,
  filters: {
    status: { type: 'string', column: 'b.status', values: BROADCAST_STATUSES },
  },
  fields: {
    id: { type: 'id', sql: 'b.id' },
    name: { type: 'string', sql: 'b.name' },
    content: { type: 'string', sql: 'b.content' },
    status: { type: 'enum', sql: 'b.status', values: BROADCAST_STATUSES },
    campaignId: { type: 'id', sql: `(b.audience ->> 'campaignId')::int`, description: 'the campaign of the audience (null for other audiences)' },
    segmentId: { type: 'id', sql: `(b.audience ->> 'segmentId')::int`, description: 'the segment of the audience (null for other audiences)' },
    scheduledFor: { type: 'datetime', sql: 'b.scheduled_for' },
    startedAt: { type: 'datetime', sql: 'b.started_at' },
    completedAt: { type: 'datetime', sql: 'b.completed_at' },
    canceledAt: { type: 'datetime', sql: 'b.canceled_at' },
    recipients: { type: 'int', sql: 'b.recipients' },
    ...auditFields('b'),
  },
  properties: [
    'id',
    'name',
    'content',
    'audience',
    'status',
    'scheduledFor',
    'startedAt',
    'completedAt',
    'canceledAt',
    'recipients',
    'counts',
    'skipped',
    'createdAt',
    'modifiedAt',
    'createdBy',
    'createdByUser',
    'modifiedBy',
    'modifiedByUser',
  ],
});

/**
 * The audience as SQL yielding contact ids as `id`, parameters appended to `params`. Reads of the
 * campaigns and segments features' membership tables, inside the statement that creates the messages
 * (a million ids never travel through the application).
 */
export function audienceSql(audience: Audience, params: unknown[]): string {
  if ('campaignId' in audience) {
    params.push(audience.campaignId);
    return `SELECT contact_id AS id FROM campaign_members WHERE campaign_id = $${params.length}`;
  }
  if ('segmentId' in audience) {
    params.push(audience.segmentId);
    return `SELECT contact_id AS id FROM segment_members WHERE segment_id = $${params.length}`;
  }
  params.push(audience.contactIds);
  return `SELECT unnest($${params.length}::int[]) AS id`;
}

export type BroadcastChanges = Omit<Partial<Broadcast>, 'id' | 'createdAt'>;

/** Every query of the `broadcasts` table (their messages are text_messages rows: TextMessageRepository). */
@Injectable()
export class BroadcastsRepository {
  constructor(private readonly transactions: Transactions) {}

  private db(tx?: Tx): Db {
    return tx ?? this.transactions.db;
  }

  private repo(tx?: Tx) {
    return this.transactions.manager(tx).getRepository(Broadcast);
  }

  list(q: ListQuery): Promise<ListPage<Broadcast>> {
    return paginate(this.repo().createQueryBuilder('b'), q, BROADCAST_LIST_SPEC);
  }

  findById(id: number, tx?: Tx): Promise<Broadcast | null> {
    return this.repo(tx).findOne({ where: { id } });
  }

  /**
   * The row, locked until the transaction ends: edits, sends, cancels and deletes apply one after the other.
   *
   * The one lock order is the broadcast row, then its messages in id order (then the counter rows
   * their statements' trigger writes). A message writer (a delivery report, a sending lane) locks
   * only its message, yet its status change writes a counter row whose foreign key check takes
   * FOR KEY SHARE on this row. FOR NO KEY UPDATE does not conflict with that share, so a writer
   * holding a message never waits on a broadcast lock; only the DELETE of the row does, and
   * `remove` runs it after it holds every message of the broadcast (TextMessageRepository
   * `detachFromBroadcast`), when no writer of those messages is left in flight.
   */
  findForUpdate(id: number, tx: Tx): Promise<Broadcast | null> {
    return this.repo(tx).findOne({ where: { id }, lock: { mode: 'for_no_key_update' } });
  }

  exists(id: number): Promise<boolean> {
    return this.repo().exists({ where: { id } });
  }

  insert(values: BroadcastChanges, tx?: Tx): Promise<Broadcast> {
    return this.repo(tx).save(this.repo(tx).create(values));
  }

  async update(id: number, changes: BroadcastChanges, tx?: Tx): Promise<void> {
    const { id: _id, createdAt: _createdAt, ...columns } = changes as Partial<Broadcast>;
    await this.repo(tx).update({ id }, columns);
  }

  /** Deletes the row: only after `findForUpdate` and the messages' `detachFromBroadcast` (the lock order above). */
  async delete(id: number, tx: Tx): Promise<void> {
    await this.repo(tx).delete({ id });
  }

  /** `sending` → `completed` once none of its messages is queued; false when that is not (yet) so. */
  async completeIfDone(id: number, tx: Tx): Promise<boolean> {
    const rows = await returning(
      tx,
      `UPDATE broadcasts b SET status = 'completed', completed_at = now(), modified_at = now()
       WHERE b.id = $1 AND b.status = 'sending'
         AND NOT EXISTS (SELECT 1 FROM text_messages t WHERE t.broadcast_id = b.id AND t.status = 'queued')
       RETURNING b.id`,
      [id],
    );
    return rows.length > 0;
  }

  /** Broadcasts in these statuses (ids and schedule), for the worker's recovery. */
  async inStatus(statuses: string[]): Promise<{ id: number; status: string; scheduledFor: Date | null }[]> {
    return this.db().query(`SELECT id, status, scheduled_for AS "scheduledFor" FROM broadcasts WHERE status = ANY($1::text[]) ORDER BY id`, [statuses]);
  }

  /** Whether a campaign exists (a read of the campaigns feature's table, for an audience). */
  async campaignExists(id: number, tx?: Tx): Promise<boolean> {
    const rows: unknown[] = await this.db(tx).query(`SELECT 1 FROM campaigns WHERE id = $1`, [id]);
    return rows.length > 0;
  }
}
