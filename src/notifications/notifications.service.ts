import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { EntityManager, Repository } from 'typeorm';
import { Notification, NotificationType } from './notification.entity.js';

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
}
