import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { NotificationsModule } from '../notifications/notifications.module.js';
import { EventsModule } from './events.module.js';
import { WebhookDeliveriesRepository } from './webhook-deliveries.repository.js';
import { WebhookDeliveriesService } from './webhook-deliveries.service.js';
import { WebhookDispatcher } from './webhook-dispatcher.js';
import { WebhookDelivery } from './webhook-delivery.entity.js';
import { Webhook } from './webhook.entity.js';
import { WebhooksController } from './webhooks.controller.js';
import { WebhooksRepository } from './webhooks.repository.js';
import { WebhooksService } from './webhooks.service.js';

/** Webhook subscriptions, their signed deliveries from the event feed, and the dispatcher. */
@Module({
  imports: [TypeOrmModule.forFeature([Webhook, WebhookDelivery]), EventsModule, NotificationsModule],
  controllers: [WebhooksController],
  providers: [WebhooksService, WebhooksRepository, WebhookDeliveriesRepository, WebhookDeliveriesService, WebhookDispatcher],
  exports: [WebhooksService],
})
export class WebhooksModule {}
