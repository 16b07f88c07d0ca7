import { Global, Module } from '@nestjs/common';
import { EventsRepository } from './events.repository.js';
import { EventsService } from './events.service.js';

/**
 * The outbox and the event feed. Global: every feature writes its events through EventsService
 * in its own transactions, and the webhooks deliver from it.
 */
@Global()
@Module({
  providers: [EventsService, EventsRepository],
  exports: [EventsService],
})
export class EventsModule {}
