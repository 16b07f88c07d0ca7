import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { EntityManager, Repository } from 'typeorm';
import { iso, isoRequired } from '../common/dates.js';
import { notFound } from '../common/errors.js';
import { type ListSpec, paginate, parseListQuery } from '../common/list.js';
import type { Principal } from '../common/request.js';
import { Notification, NOTIFICATION_TYPES, type NotificationType } from './notification.entity.js';

export const NOTIFICATION_LIST_SPEC: ListSpec = {
  sortable: { id: 'n.id', type: 'n.type', isRead: 'n.is_read', createdAt: 'n.created_at', modifiedAt: 'n.modified_at' },
  searchExpression: 'sf_text(n.message)',
  filters: {
    isRead: { type: 'boolean', column: 'n.is_read' },
    type: { type: 'string', column: 'n.type', values: NOTIFICATION_TYPES },
  },
};

export type NotificationRecord = ReturnType<NotificationsService['toRecord']>;

@Injectable()
export class NotificationsService {
  constructor(@InjectRepository(Notification) private readonly notifications: Repository<Notification>) {}

  /** Leaves a notification for a user (the service's own events; there is no create endpoint). */
  async notify(
    userId: number,
    type: NotificationType,
    message: string,
    details: Record<string, unknown> = {},
    manager?: EntityManager,
  ): Promise<Notification> {
    const repo = manager ? manager.getRepository(Notification) : this.notifications;
    return repo.save(repo.create({ userId, type, message, details, isRead: false, modifiedAt: null }));
  }

  toRecord(n: Notification, who: Principal) {
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

  /** The caller's notifications only. */
  async list(query: Record<string, unknown>, who: Principal) {
    const q = parseListQuery(query, NOTIFICATION_LIST_SPEC);
    const qb = this.notifications.createQueryBuilder('n').where('n.user_id = :userId', { userId: who.userId });
    const { total, items } = await paginate(qb, q, NOTIFICATION_LIST_SPEC);
    return { total, notifications: items.map((n) => this.toRecord(n, who)) };
  }

  /** Another user's notification is a 404, exactly like one that does not exist. */
  private async findOwn(id: number, who: Principal, manager?: EntityManager): Promise<Notification> {
    const n = await (manager ? manager.getRepository(Notification) : this.notifications).findOne({ where: { id, userId: who.userId } });
    if (!n) throw notFound('Notification', id);
    return n;
  }

  async get(id: number, who: Principal): Promise<NotificationRecord> {
    return this.toRecord(await this.findOwn(id, who), who);
  }

  /** Marks one of the caller's notifications read (modifiedAt is set when it changes; idempotent). */
  async markRead(id: number, who: Principal): Promise<NotificationRecord> {
    await this.notifications
      .createQueryBuilder()
      .update(Notification)
      .set({ isRead: true, modifiedAt: () => 'now()' })
      .where('id = :id AND user_id = :userId AND NOT is_read', { id, userId: who.userId })
      .execute();
    return this.get(id, who);
  }

  /** Marks every unread notification of the caller read; answers how many changed. */
  async markAllRead(who: Principal): Promise<{ success: true; updated: number }> {
    const r = await this.notifications
      .createQueryBuilder()
      .update(Notification)
      .set({ isRead: true, modifiedAt: () => 'now()' })
      .where('user_id = :userId AND NOT is_read', { userId: who.userId })
      .execute();
    return { success: true, updated: r.affected ?? 0 };
  }

  async remove(id: number, who: Principal): Promise<NotificationRecord> {
    return this.notifications.manager.transaction(async (m) => {
      const n = await this.findOwn(id, who, m);
      await m.getRepository(Notification).delete({ id: n.id, userId: who.userId });
      return this.toRecord(n, who);
    });
  }
}
