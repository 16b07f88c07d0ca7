import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { CampaignsModule } from '../campaigns/campaigns.module.js';
import { ContactsModule } from '../contacts/contacts.module.js';
import { EventsModule } from '../events/events.module.js';
import { TrackingModule } from '../tracking/tracking.module.js';
import { SegmentRefreshService } from './segment-refresh.service.js';
import { SegmentRefresher } from './segment-refresher.js';
import { Segment } from './segment.entity.js';
import { ContactSegmentsController, SegmentsController } from './segments.controller.js';
import { SegmentsRepository } from './segments.repository.js';
import { SegmentsService } from './segments.service.js';

@Module({
  imports: [EventsModule, TypeOrmModule.forFeature([Segment]), ContactsModule, CampaignsModule, TrackingModule],
  controllers: [SegmentsController, ContactSegmentsController],
  providers: [SegmentsService, SegmentsRepository, SegmentRefreshService, SegmentRefresher],
  exports: [SegmentsService, SegmentRefreshService],
})
export class SegmentsModule {}
