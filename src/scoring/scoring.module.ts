import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { ContactsModule } from '../contacts/contacts.module.js';
import { EventsModule } from '../events/events.module.js';
import { PointGroupsModule } from '../point-groups/point-groups.module.js';
import { TrackingModule } from '../tracking/tracking.module.js';
import { ContactPointsController } from './contact-points.controller.js';
import { PointChange } from './point-change.entity.js';
import { ScoringApplier } from './scoring-applier.js';
import { ScoringJobsService } from './scoring-jobs.service.js';
import { ScoringRule } from './scoring-rule.entity.js';
import { ScoringRulesController } from './scoring-rules.controller.js';
import { ScoringRulesRepository } from './scoring-rules.repository.js';
import { ScoringRulesService } from './scoring-rules.service.js';
import { ScoringController } from './scoring.controller.js';
import { ScoringProcessor } from './scoring.processor.js';
import { ScoringRepository } from './scoring.repository.js';
import { ScoringService } from './scoring.service.js';

/**
 * Lead scoring: the point ledger and contacts' points, scoring rules applied from the change feed
 * and from the tracked events queued for scoring, tiers, decay, recompute and what-if.
 */
@Module({
  imports: [EventsModule, ContactsModule, PointGroupsModule, TrackingModule, TypeOrmModule.forFeature([ScoringRule, PointChange])],
  controllers: [ScoringRulesController, ContactPointsController, ScoringController],
  providers: [ScoringService, ScoringRulesService, ScoringJobsService, ScoringRepository, ScoringRulesRepository, ScoringApplier, ScoringProcessor],
  exports: [ScoringService, ScoringRulesService],
})
export class ScoringModule {}
