import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { ActivitiesModule } from '../activities/activities.module.js';
import { AuthModule } from '../auth/auth.module.js';
import { CampaignsModule } from '../campaigns/campaigns.module.js';
import { ContactsModule } from '../contacts/contacts.module.js';
import { EventsModule } from '../events/events.module.js';
import { WebhooksModule } from '../events/webhooks.module.js';
import { NotificationsModule } from '../notifications/notifications.module.js';
import { ScoringModule } from '../scoring/scoring.module.js';
import { SegmentsModule } from '../segments/segments.module.js';
import { TextMessagesModule } from '../text-messages/text-messages.module.js';
import { TrackingModule } from '../tracking/tracking.module.js';
import { ContactWorkflowsController, EnrollmentsController } from './enrollments.controller.js';
import { EnrollmentStatsRepository } from './enrollment-stats.repository.js';
import { EnrollmentsRepository } from './enrollments.repository.js';
import { EnrollmentsService } from './enrollments.service.js';
import { WorkflowDryRun } from './workflow-dry-run.js';
import { WorkflowEngine } from './workflow-engine.js';
import { WorkflowEventWaits } from './workflow-event-waits.js';
import { WorkflowRunner } from './workflow-runner.js';
import { StepEffects } from './workflow-steps.js';
import { WorkflowTrackedFollower } from './workflow-tracked-follower.js';
import { WorkflowTriggers } from './workflow-triggers.js';
import { WorkflowValidator } from './workflow-validation.js';
import { WebhookWaitsRepository } from './webhook-waits.repository.js';
import { SegmentEnrolment } from './segment-enrolment.js';
import { SegmentEnrolmentProcessor } from './segment-enrolment.processor.js';
import { SegmentEnrolmentRepository } from './segment-enrolment.repository.js';
import { WebhookStep } from './workflow-webhook-step.js';
import { WorkflowWebhookWaits } from './workflow-webhook-waits.js';
import { Workflow, WorkflowEnrollment, WorkflowVersion } from './workflow.entity.js';
import { WorkflowsController } from './workflows.controller.js';
import { WorkflowsRepository } from './workflows.repository.js';
import { WorkflowsService } from './workflows.service.js';

/** Automation: workflow definitions, their triggers, the steps' engine and its runner, enrollments. */
@Module({
  imports: [
    TypeOrmModule.forFeature([Workflow, WorkflowVersion, WorkflowEnrollment]),
    EventsModule,
    WebhooksModule,
    ContactsModule,
    CampaignsModule,
    SegmentsModule,
    ActivitiesModule,
    NotificationsModule,
    TextMessagesModule,
    ScoringModule,
    TrackingModule,
    AuthModule,
  ],
  controllers: [WorkflowsController, EnrollmentsController, ContactWorkflowsController],
  providers: [
    WorkflowsService,
    WorkflowsRepository,
    EnrollmentsService,
    EnrollmentsRepository,
    EnrollmentStatsRepository,
    WorkflowValidator,
    WorkflowEngine,
    StepEffects,
    WorkflowRunner,
    WorkflowTriggers,
    WorkflowDryRun,
    WorkflowEventWaits,
    WorkflowTrackedFollower,
    WebhookStep,
    WebhookWaitsRepository,
    WorkflowWebhookWaits,
    SegmentEnrolment,
    SegmentEnrolmentRepository,
    SegmentEnrolmentProcessor,
  ],
  exports: [WorkflowsService, EnrollmentsService],
})
export class WorkflowsModule {}
