import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { ContactsModule } from '../contacts/contacts.module.js';
import { EventsModule } from '../events/events.module.js';
import { WebhooksModule } from '../events/webhooks.module.js';
import { TrackedEvent } from './tracked-event.entity.js';
import { TrackedEventQueue } from './tracked-event-queue.repository.js';
import { ContactTimelineController, TrackingController, TrackingIntakeController } from './tracking.controller.js';
import { TrackingIntakeService } from './tracking-intake.service.js';
import { TrackingProcessor } from './tracking.processor.js';
import { TrackingRepository } from './tracking.repository.js';
import { TrackingService } from './tracking.service.js';

/** Tracked events: the Segment-compatible intake, identity, definitions, the list and the contact timeline. */
@Module({
  imports: [TypeOrmModule.forFeature([TrackedEvent]), ContactsModule, EventsModule, WebhooksModule],
  controllers: [TrackingIntakeController, TrackingController, ContactTimelineController],
  providers: [TrackingRepository, TrackingService, TrackingIntakeService, TrackingProcessor, TrackedEventQueue],
  exports: [TrackingService, TrackingIntakeService, TrackedEventQueue],
})
export class TrackingModule {}
