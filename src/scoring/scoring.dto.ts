import { ApiProperty, PartialType } from '@nestjs/swagger';
import { Type } from 'class-transformer';
import {
  Allow,
  ArrayMaxSize,
  ArrayNotEmpty,
  IsArray,
  IsBoolean,
  IsDefined,
  IsInt,
  IsNotEmpty,
  IsObject,
  IsOptional,
  IsString,
  Matches,
  Max,
  MaxLength,
  Min,
  ValidateIf,
  ValidateNested,
} from 'class-validator';
import { AuditRecordDto } from '../common/audit.dto.js';
import { NotBlank, Rule } from '../common/documented-rules.js';
import { IsIsoDateTime, NoNul } from '../common/validation.js';
import { DURATION_PATTERN } from './scoring.rules.js';

const FILTER_PROPERTY = {
  description:
    'With recordEvent: a filter over the contact the event is about, as the `filter` of GET /api/contacts (JSON form or query-string form; ' +
    'every field but segment.id, points and pointGroup.id), evaluated when the event is applied. With trackedEvent: a filter over the ' +
    "event's properties, fields named `properties.<name>`. Stored and answered in the JSON form.",
  oneOf: [{ $ref: '#/components/schemas/FilterNode' }, { type: 'string', maxLength: 65536 }],
  required: false,
  nullable: true,
};

/** What a rule reacts to: exactly one of recordEvent and trackedEvent, with an optional filter. */
export class ScoringRuleOnDto {
  /** A change-feed event type of the catalogue (GET /api/events), e.g. `contact.updated`, `deal.won`. */
  @IsOptional()
  @IsString()
  @MaxLength(100)
  @Rule('an event type of the catalogue; exactly one of recordEvent and trackedEvent')
  recordEvent?: string;

  /** A tracked event's name (the tracking intake's `event`), e.g. `Pricing Viewed`. */
  @IsOptional()
  @IsString()
  @IsNotEmpty()
  @MaxLength(200)
  @NoNul()
  trackedEvent?: string;

  @ApiProperty(FILTER_PROPERTY)
  @IsOptional()
  @Allow()
  @Rule('a filter that compiles (unknown field, an operator the field does not take or a bad value: 400)')
  filter?: Record<string, unknown> | string | null;
}

/** A scoring rule (create and PUT; PATCH takes any subset). */
export class CreateScoringRuleDto {
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

  /** Only published rules are applied (default true). */
  @IsOptional()
  @IsBoolean()
  isPublished?: boolean;

  @IsObject()
  @ValidateNested()
  @Type(() => ScoringRuleOnDto)
  @Rule(
    'exactly one of recordEvent (an event type of the catalogue) and trackedEvent; the filter must compile (over the contact for recordEvent, over properties.<name> for trackedEvent)',
  )
  on: ScoringRuleOnDto;

  /** Points each application adds (negative: removes); not 0, at most 1,000,000 either way. */
  @IsInt()
  @Min(-1000000)
  @Max(1000000)
  @Rule('not 0')
  delta: number;

  /** false: applied at most once per contact (default true). */
  @IsOptional()
  @IsBoolean()
  repeatable?: boolean;

  /** Applications per contact at most (null: no limit). */
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(2147483647)
  maxPerContact?: number | null;

  /** Not applied again to a contact within this time of its last application: a number and a unit s, m, h, d or w (`1d`); null for none. */
  @IsOptional()
  @IsString()
  @Matches(DURATION_PATTERN, { message: 'cooldown must be a duration: a number and a unit s, m, h, d or w, e.g. 1d' })
  cooldown?: string | null;
}

export class UpdateScoringRuleDto extends PartialType(CreateScoringRuleDto) {}

export class ScoringRuleOnRecordDto {
  recordEvent?: string;
  trackedEvent?: string;
  /** The filter in its JSON form, or null. */
  filter: Record<string, unknown> | null;
}

export class ScoringRuleRecordDto extends AuditRecordDto {
  id: number;
  name: string;
  description: string | null;
  isPublished: boolean;
  on: ScoringRuleOnRecordDto;
  delta: number;
  repeatable: boolean;
  maxPerContact: number | null;
  cooldown: string | null;
}

/** Body of POST /api/contacts/{id}/points. */
export class AddPointsDto {
  /** Points to add (negative: remove); not 0, at most 1,000,000 either way; the result must stay within ±2^31. */
  @IsInt()
  @Min(-1000000)
  @Max(1000000)
  @Rule('not 0; the contact’s points must stay within -2147483648..2147483647')
  delta: number;

  /** Why (shown in the history). */
  @IsString()
  @IsNotEmpty()
  @MaxLength(500)
  @NoNul()
  @NotBlank()
  reason: string;
}

export class PointChangeByDto {
  id: number | null;
  name: string | null;
}

/** One row of a contact's point ledger. */
export class PointChangeRecordDto {
  id: number;
  contactId: number;
  delta: number;
  reason: string;
  /** manual, rule, workflow, decay or import. */
  source: string;
  /** The rule that gave the points (source rule). */
  ruleId: number | null;
  /** The event the points answer (a change-feed event id, or a tracked event id). */
  sourceEventId: string | null;
  /** Extra context (a workflow's enrollment and step, a decay period). */
  details: Record<string, unknown> | null;
  at: string;
  /** Who: the user behind the token (manual), null for rules and decay. */
  by: PointChangeByDto | null;
}

export class PointChangeEnvelopeDto {
  pointChange: PointChangeRecordDto;
  /** The contact's points after the change. */
  points: number;
}

export class DecaySettingsDto {
  /** Percent of a contact's points (towards 0, rounded up so small scores reach 0) removed each period. */
  @IsInt()
  @Min(1)
  @Max(100)
  percent: number;

  /** The period: a number and a unit h, d or w, e.g. `30d`. */
  @IsString()
  @Matches(/^[1-9]\d{0,4}[hdw]$/, { message: 'every must be a period: a number and a unit h, d or w, e.g. 30d' })
  every: string;
}

/** Body of POST /api/scoring/settings. */
export class ScoringSettingsDto {
  /** Decay of points, or null for none. */
  @ApiProperty({ type: DecaySettingsDto, nullable: true })
  @ValidateIf((o: ScoringSettingsDto) => o.decay !== null)
  @IsDefined({ message: 'decay is required (null for none)' })
  @IsObject()
  @ValidateNested()
  @Type(() => DecaySettingsDto)
  decay: DecaySettingsDto | null;
}

export class DecaySettingsRecordDto {
  percent: number;
  every: string;
  /** When the first period began (the settings' time); a period ends every `every` after it. */
  since: string;
}

export class ScoringSettingsRecordDto {
  decay: DecaySettingsRecordDto | null;
}

/** Body of POST /api/scoring/what-if. */
export class WhatIfDto {
  /** Draft rules (as a rule's body; not stored). */
  @IsArray()
  @ArrayNotEmpty()
  @ArrayMaxSize(50)
  @ValidateNested({ each: true })
  @Type(() => CreateScoringRuleDto)
  rules: CreateScoringRuleDto[];

  /** Replay the stored events (kept change-feed events, stored tracked events) that occurred at or after this time. */
  @IsIsoDateTime()
  since: string;
}

/** A recompute or what-if run. */
export class ScoringJobRecordDto {
  id: number;
  /** recompute or what_if. */
  kind: string;
  /** queued, running, completed or failed. */
  status: string;
  /** What is done so far (contacts or events read). */
  progress: Record<string, unknown>;
  /**
   * Once completed. recompute: { checked, repaired }. what_if: { since, events, recordEvents, trackedEvents, applications, pointGroups: [{ id, name, now, wouldBe, entering, leaving }] }.
   */
  result: Record<string, unknown> | null;
  error: string | null;
  createdAt: string;
  startedAt: string | null;
  finishedAt: string | null;
}
