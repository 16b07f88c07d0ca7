import { ApiProperty, type ApiPropertyOptions, ApiPropertyOptional, PartialType } from '@nestjs/swagger';
import {
  Allow,
  ArrayMaxSize,
  ArrayNotEmpty,
  IsArray,
  IsDefined,
  IsIn,
  IsInt,
  IsNotEmpty,
  IsObject,
  IsOptional,
  Min,
  IsString,
  MaxLength,
} from 'class-validator';
import { AuditRecordDto } from '../common/audit.dto.js';
import { NotBlank, References, Rule } from '../common/documented-rules.js';
import { IsIsoDateTime, NoNul } from '../common/validation.js';
import { ENROLLMENT_STATUSES, REENROLLMENT, STEP_TYPES, TRIGGER_TYPES, WORKFLOW_STATUSES } from './workflow-definition.js';

/** Contacts a manual enrolment takes at most. */
export const ENROL_MAX = 10_000;

const TRIGGER_PROPERTY = {
  type: 'object',
  description:
    `One of: { type: "manual" }; { type: "record_event", event, filter?, changed? } (event one of contact.created, contact.updated, contact.owner_changed, ` +
    `deal.created|updated|stage_changed|won|lost, activity.created, campaign.contact_added|contact_removed; filter over the contact; changed: property names ` +
    `of which one must be in the event's previous); { type: "tracked_event", name, filter? } (filter over the event's properties.<name>); ` +
    `{ type: "segment_entered", segmentId, enrollExisting? }; { type: "segment_exited", segmentId }; ` +
    `{ type: "schedule", cron, segmentId } (the cron in the workflow's time zone). Types: ${TRIGGER_TYPES.join(', ')}.`,
  additionalProperties: true,
  properties: { type: { type: 'string', enum: [...TRIGGER_TYPES] } },
  required: ['type'],
} as unknown as ApiPropertyOptions;

const STEPS_PROPERTY = {
  type: 'array',
  maxItems: 200,
  description:
    'The steps, each { key, type, next?, ... }; the first is the entry step. See the README (Workflows) for every type: ' +
    `${STEP_TYPES.join(', ')}. Checked on save: every next names a step, every step is reachable, no cycle without a wait, at most 200 steps.`,
  items: {
    type: 'object',
    additionalProperties: true,
    properties: { key: { type: 'string', maxLength: 64 }, type: { type: 'string', enum: [...STEP_TYPES] }, next: { type: 'string' } },
    required: ['key', 'type'],
  },
} as unknown as ApiPropertyOptions;

const SETTINGS_PROPERTY = {
  type: 'object',
  description:
    'reenrollment (never | afterExit | always, default never), timezone (an IANA name, default UTC), sendWindow ({ from: "09:00", to: "20:00", days: [1..7] } or null: SMS steps wait for it).',
  properties: {
    reenrollment: { type: 'string', enum: [...REENROLLMENT] },
    timezone: { type: 'string' },
    sendWindow: {
      type: 'object',
      nullable: true,
      properties: { from: { type: 'string' }, to: { type: 'string' }, days: { type: 'array', items: { type: 'integer', minimum: 1, maximum: 7 } } },
    },
  },
} as unknown as ApiPropertyOptions;

/** Workflow body (create and PUT). */
export class CreateWorkflowDto {
  @IsString()
  @IsNotEmpty()
  @MaxLength(255)
  @NoNul()
  @NotBlank()
  name: string;

  @IsOptional()
  @IsString()
  @MaxLength(65535)
  @NoNul()
  description?: string | null;

  /** draft (default): nothing runs; active: the trigger enrols and steps run; paused: no entry, no step runs (waits keep counting); archived: as paused. */
  @ApiProperty({ enum: WORKFLOW_STATUSES, required: false })
  @IsOptional()
  @IsIn(WORKFLOW_STATUSES, { message: `status must be one of ${WORKFLOW_STATUSES.join(', ')}` })
  status?: 'draft' | 'active' | 'paused' | 'archived';

  @ApiProperty(TRIGGER_PROPERTY)
  @IsDefined({ message: 'trigger is required' })
  @IsObject({ message: 'trigger must be an object with a type' })
  @Rule('a trigger of a known type, with the properties of its type; the segment it names exists, its filter compiles, its cron parses')
  trigger: Record<string, unknown>;

  @ApiProperty(STEPS_PROPERTY)
  @IsDefined({ message: 'steps is required' })
  @IsArray({ message: 'steps must be a list of steps' })
  @Rule('a valid graph of steps (a 400 names the step key and field)')
  steps: Record<string, unknown>[];

  @ApiPropertyOptional(SETTINGS_PROPERTY)
  @IsOptional()
  @IsObject({ message: 'settings must be an object' })
  @Rule('reenrollment one of never, afterExit, always; timezone an IANA name; sendWindow { from, to, days } or null')
  settings?: Record<string, unknown>;
}

/** PATCH body: any subset. Changing the steps of a workflow that is not a draft saves a new version. */
export class UpdateWorkflowDto extends PartialType(CreateWorkflowDto) {}

/** Enrollment counts of a workflow. */
export class WorkflowStatsSummaryDto {
  entered: number;
  active: number;
  completed: number;
  converted: number;
  exited: number;
  failed: number;
}

/** A workflow as the API returns it. */
export class WorkflowRecordDto extends AuditRecordDto {
  id: number;
  name: string;
  description: string | null;
  @ApiProperty({ enum: WORKFLOW_STATUSES })
  status: string;
  /** The current version (new enrollments enter it). */
  version: number;
  @ApiProperty(TRIGGER_PROPERTY)
  trigger: Record<string, unknown>;
  @ApiProperty(STEPS_PROPERTY)
  steps: Record<string, unknown>[];
  @ApiProperty(SETTINGS_PROPERTY)
  settings: Record<string, unknown>;
  stats: WorkflowStatsSummaryDto;
}

/** `POST /api/workflows/{id}/enrollments`. */
export class EnrolContactsDto {
  /** Contact ids, at most 10,000 (more is a 413). */
  @IsArray()
  @ArrayNotEmpty()
  @ArrayMaxSize(1_000_000)
  @IsInt({ each: true })
  @Min(1, { each: true })
  @Rule('at most 10,000 ids (413 beyond)')
  contactIds: number[];
}

/** An enrollment as the API returns it. */
export class EnrollmentRecordDto {
  id: number;
  workflowId: number;
  version: number;
  contactId: number;
  @ApiProperty({ enum: ENROLLMENT_STATUSES })
  status: string;
  /** The step it is at (the next to run, or the wait it waits at); the last one once ended. */
  stepKey: string | null;
  /** When its next step is due (null once ended). */
  nextAt: string | null;
  enteredAt: string;
  endedAt: string | null;
  /** Why it failed (or exited early). */
  error: string | null;
}

/** One step run of an enrollment. */
export class StepRunDto {
  seq: number;
  stepKey: string;
  stepType: string;
  /** completed, waiting, skipped, failed, exited or converted. */
  outcome: string;
  @ApiProperty({ type: 'object', nullable: true, additionalProperties: true })
  detail: Record<string, unknown> | null;
  ranAt: string;
}

export class EnrollmentDetailDto extends EnrollmentRecordDto {
  history: StepRunDto[];
}

/** The answer of a manual enrolment. */
export class EnrolResultDto {
  /** Contacts enrolled now. */
  enrolled: number;
  @ApiProperty({ type: [EnrollmentRecordDto] })
  enrollments: EnrollmentRecordDto[];
  /** Ids that name no contact. */
  notFound: number[];
}

/** A workflow a contact is or was enrolled in. */
export class ContactWorkflowDto extends EnrollmentRecordDto {
  workflowName: string;
}

export class ContactWorkflowsDto {
  total: number;
  @ApiProperty({ type: [ContactWorkflowDto] })
  workflows: ContactWorkflowDto[];
}

/** Per step of the current version. */
export class StepStatsDto {
  key: string;
  type: string;
  /** Enrollments at this step now (waiting there, or due to run it). */
  waiting: number;
  /** Runs of the step that did not fail. */
  completed: number;
  failed: number;
}

export class WorkflowStatsDto {
  workflowId: number;
  entered: number;
  active: number;
  completed: number;
  converted: number;
  exited: number;
  failed: number;
  /** converted / entered (0 when none entered). */
  conversionRate: number;
  /** Median seconds from entry to conversion (null when none converted). */
  medianSecondsToConvert: number | null;
  @ApiProperty({ type: [StepStatsDto] })
  steps: StepStatsDto[];
}

/** `POST /api/workflows/{id}/dry-run`. */
export class DryRunDto {
  @IsInt()
  @Min(1)
  @References('contact')
  contactId: number;

  /** The instant to run at (default now). */
  @IsOptional()
  @IsIsoDateTime()
  at?: string;

  /** A draft definition to run instead of the saved one ({ trigger?, steps, settings? }). */
  @ApiPropertyOptional({ type: 'object', additionalProperties: true })
  @IsOptional()
  @IsObject()
  @Allow()
  @Rule('checked as a saved definition is (a 400 names the step key and field)')
  definition?: Record<string, unknown>;
}

/** One step of a dry run's path. */
export class DryRunStepDto {
  key: string;
  type: string;
  /** What the step would do, or what it decided and why. */
  decision: string;
  /** For a wait: when it would be due. */
  dueAt?: string | null;
}

export class DryRunResultDto {
  contactId: number;
  at: string;
  /** Whether the contact matches a goal now (the path then ends converted). */
  converted: boolean;
  @ApiProperty({ type: [DryRunStepDto] })
  path: DryRunStepDto[];
  /** How the path ends: completed, exited, converted, or waiting (the path stops at the first wait that is not over at `at`... it follows waits, see README). */
  ends: string;
}

/** `POST /api/workflows/{id}/migrate`. */
export class MigrateDto {
  @IsInt()
  @Min(1)
  @Rule('an earlier version of the workflow (not the current one)')
  fromVersion: number;

  /** Old step key → new step key; keys not named stay as they are (and must exist in the current version). */
  @ApiPropertyOptional({ type: 'object', additionalProperties: { type: 'string' } })
  @IsOptional()
  @IsObject()
  @Rule('each value a step key of the current version; every step key running enrollments are at must map to one')
  map?: Record<string, string>;
}

export class MigrateResultDto {
  /** Running enrollments moved to the current version. */
  migrated: number;
  fromVersion: number;
  toVersion: number;
}
