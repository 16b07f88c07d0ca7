import { Module } from '@nestjs/common';
import { EventsController } from './events.controller.js';
import { EventsPruneProcessor } from './events-prune.processor.js';
import { EventsRepository } from './events.repository.js';
import { EventsService } from './events.service.js';

/**
 * The outbox and the event feed. Every feature module that writes records imports it and writes
 * its events through EventsService in its own transactions; the webhooks deliver from it.
 */
@Module({
  controllers: [EventsController],
  providers: [EventsService, EventsRepository, EventsPruneProcessor],
  exports: [EventsService],
})
export class EventsModule {}
