import { Injectable } from '@nestjs/common';
import { iso, isoRequired } from '../common/dates.js';
import { notFound } from '../common/errors.js';
import { parseListQuery } from '../lists/list-query.js';
import { listEnvelope } from '../lists/list-sql.js';
import type { Principal } from '../common/request.js';
import type { Tx } from '../database/transactions.js';
import type { NotificationType } from './notification.entity.js';
import { NOTIFICATION_LIST_SPEC, type NotificationRow, NotificationsRepository } from './notifications.repository.js';

/** The one mapper from a stored notification to the API record (the caller is always its user). */
export function toNotificationRecord(n: NotificationRow, who: Principal) {
  return {
    id: n.id,
    message: n.message,
    type: n.type,
    isRead: n.isRead,
    createdAt: isoRequired(n.createdAt),
    modifiedAt: iso(n.modifiedAt),
    userId: n.userId,
    userName: who.userName,
    details: n.details ?? {},
  };
}

export type NotificationRecord = ReturnType<typeof toNotificationRecord>;

@Injectable()
export class NotificationsService {
  constructor(private readonly notifications: NotificationsRepository) {}

  /**
   * Leaves a notification for a user (the service's own events; there is no create endpoint). Other
   * features call this, with their transaction when the notification belongs to their change.
   */
  notify(userId: number, type: NotificationType, message: string, details: Record<string, unknown> = {}, tx?: Tx): Promise<NotificationRow> {
    return this.notifications.insert({ userId, type, message, details }, tx);
  }

  /** The caller's notifications only. */
  async list(query: Record<string, unknown>, who: Principal) {
    const q = parseListQuery(query, NOTIFICATION_LIST_SPEC);
    const page = await this.notifications.page(q, who.userId);
    return listEnvelope(
      q,
      'notifications',
      page,
      page.items.map((n) => toNotificationRecord(n, who)),
    );
  }

  /** Another user's notification is a 404, exactly like one that does not exist. */
  async get(id: number, who: Principal): Promise<NotificationRecord> {
    return toNotificationRecord(this.found(await this.notifications.findOwn(id, who.userId), id), who);
  }

  /** Marks one of the caller's notifications read (modifiedAt is set when it changes; idempotent). */
  async markRead(id: number, who: Principal): Promise<NotificationRecord> {
    return toNotificationRecord(this.found(await this.notifications.markRead(id, who.userId), id), who);
  }

  /** Marks every unread notification of the caller read; answers how many changed. */
  async markAllRead(who: Principal): Promise<{ success: true; updated: number }> {
    return { success: true, updated: await this.notifications.markAllRead(who.userId) };
  }

  /** Exactly one of concurrent deletes gets the notification; the others a 404. */
  async remove(id: number, who: Principal): Promise<NotificationRecord> {
    return toNotificationRecord(this.found(await this.notifications.remove(id, who.userId), id), who);
  }

  private found(n: NotificationRow | null, id: number): NotificationRow {
    if (!n) throw notFound('Notification', id);
    return n;
  }
}
