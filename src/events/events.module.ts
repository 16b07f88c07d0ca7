import { Global, Module } from '@nestjs/common';
import { EventsController } from './events.controller.js';
import { EventsPruneProcessor } from './events-prune.processor.js';
import { EventsRepository } from './events.repository.js';
import { EventsService } from './events.service.js';

/**
 * The outbox and the event feed. Global: every feature writes its events through EventsService
 * in its own transactions, and the webhooks deliver from it.
 */
@Global()
@Module({
  controllers: [EventsController],
  providers: [EventsService, EventsRepository, EventsPruneProcessor],
  exports: [EventsService],
})
export class EventsModule {}
