import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import type { Repository } from 'typeorm';
import { auditFields, defineList, type ListQuery } from '../lists/list-spec.js';
import { type ListPage, paginate } from '../lists/list-sql.js';
import { type Db, Transactions, type Tx } from '../database/transactions.js';
import { Notification, NOTIFICATION_TYPES, type NotificationType } from './notification.entity.js';

export const NOTIFICATION_LIST_SPEC = defineList({
  name: 'notifications',
  sortable: ['id', 'type', 'isRead', 'createdAt', 'modifiedAt'],
  searchExpression: 'sf_text(n.message)',
  filters: {
    isRead: { type: 'boolean', column: 'n.is_read' },
    type: { type: 'string', column: 'n.type', values: NOTIFICATION_TYPES },
  },
  fields: {
    id: { type: 'id', sql: 'n.id' },
    type: { type: 'enum', sql: 'n.type', values: NOTIFICATION_TYPES },
    message: { type: 'string', sql: 'n.message' },
    isRead: { type: 'boolean', sql: 'n.is_read' },
    ...auditFields('n'),
  },
  properties: ['id', 'message', 'type', 'isRead', 'createdAt', 'modifiedAt', 'userId', 'userName', 'details'],
});

/** A stored notification (an entity, or a raw row with the same property names). */
export type NotificationRow = Pick<Notification, 'id' | 'userId' | 'type' | 'message' | 'details' | 'isRead' | 'createdAt' | 'modifiedAt'>;

/** Columns of a NotificationRow. UPDATE/DELETE ... RETURNING go through a CTE so the pool answers rows (TypeORM answers [rows, count] for a bare UPDATE/DELETE). */
const ROW_COLUMNS = `id, user_id AS "userId", type, message, details, is_read AS "isRead", created_at AS "createdAt", modified_at AS "modifiedAt"`;

/** Every query of the `notifications` table; each one is scoped to the owning user. */
@Injectable()
export class NotificationsRepository {
  constructor(
    @InjectRepository(Notification) private readonly notifications: Repository<Notification>,
    private readonly transactions: Transactions,
  ) {}

  private db(tx?: Tx): Db {
    return tx ?? this.transactions.db;
  }

  async insert(v: { userId: number; type: NotificationType; message: string; details: Record<string, unknown> }, tx?: Tx): Promise<NotificationRow> {
    const rows: NotificationRow[] = await this.db(tx).query(
      `INSERT INTO notifications (user_id, type, message, details) VALUES ($1, $2, $3, $4::jsonb) RETURNING ${ROW_COLUMNS}`,
      [v.userId, v.type, v.message, JSON.stringify(v.details)],
    );
    return rows[0];
  }

  /** A page of the user's notifications. */
  page(q: ListQuery, userId: number): Promise<ListPage<Notification>> {
    const qb = this.notifications.createQueryBuilder('n').where('n.user_id = :userId', { userId });
    return paginate(qb, q, NOTIFICATION_LIST_SPEC);
  }

  async findOwn(id: number, userId: number, tx?: Tx): Promise<NotificationRow | null> {
    const rows: NotificationRow[] = await this.db(tx).query(`SELECT ${ROW_COLUMNS} FROM notifications WHERE id = $1 AND user_id = $2`, [id, userId]);
    return rows[0] ?? null;
  }

  /**
   * Marks one read in one statement and answers the row as it now is (null when the user has no such
   * notification). modified_at is set only by the change from unread to read, so marking again, or
   * concurrently, changes nothing further.
   */
  async markRead(id: number, userId: number, tx?: Tx): Promise<NotificationRow | null> {
    const rows: NotificationRow[] = await this.db(tx).query(
      `WITH n AS (UPDATE notifications SET modified_at = CASE WHEN is_read THEN modified_at ELSE now() END, is_read = true
                   WHERE id = $1 AND user_id = $2 RETURNING *)
       SELECT ${ROW_COLUMNS} FROM n`,
      [id, userId],
    );
    return rows[0] ?? null;
  }

  /** Marks every unread notification of the user read; answers how many changed. */
  async markAllRead(userId: number, tx?: Tx): Promise<number> {
    // For UPDATE, TypeORM's raw result is [rows, rowCount].
    const [, updated]: [unknown[], number] = await this.db(tx).query(
      `UPDATE notifications SET is_read = true, modified_at = now() WHERE user_id = $1 AND NOT is_read`,
      [userId],
    );
    return updated;
  }

  /** Deletes and answers the row as it was; null when nothing was deleted (so exactly one concurrent caller gets it). */
  async remove(id: number, userId: number, tx?: Tx): Promise<NotificationRow | null> {
    const rows: NotificationRow[] = await this.db(tx).query(
      `WITH n AS (DELETE FROM notifications WHERE id = $1 AND user_id = $2 RETURNING *) SELECT ${ROW_COLUMNS} FROM n`,
      [id, userId],
    );
    return rows[0] ?? null;
  }
}
