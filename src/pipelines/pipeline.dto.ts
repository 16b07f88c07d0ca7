import { ApiProperty, PartialType } from '@nestjs/swagger';
import { Type } from 'class-transformer';
import {
  ArrayMaxSize,
  ArrayNotEmpty,
  IsArray,
  IsBoolean,
  IsIn,
  IsInt,
  IsNotEmpty,
  IsOptional,
  IsString,
  Max,
  MaxLength,
  Min,
  ValidateNested,
} from 'class-validator';
import { NoNul } from '../common/validation.js';
import { AuditRecordDto } from '../common/audit.dto.js';
import { NotBlank, Rule } from '../common/documented-rules.js';
import { MAX_STAGES, STAGE_TYPES, type StageType } from './pipeline.rules.js';

/** A stage as a pipeline body gives it. */
export class StageInputDto {
  /** The stage's id, to keep (rename, re-probability, reorder) an existing stage in a replace; omitted for a new stage. */
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(2147483647)
  id?: number;

  @IsString()
  @IsNotEmpty()
  @MaxLength(255)
  @NoNul()
  @NotBlank()
  @Rule("unique among the pipeline's stages")
  name: string;

  /** Win probability in percent, 0..100. */
  @IsInt()
  @Min(0)
  @Max(100)
  probability: number;

  /** open (default), won or lost. */
  @IsOptional()
  @IsIn(STAGE_TYPES)
  @ApiProperty({ enum: STAGE_TYPES, required: false })
  type?: StageType;
}

/**
 * Pipeline body. Stages are in order; a pipeline needs at least one open stage and unique stage names.
 */
export class CreatePipelineDto {
  @IsString()
  @IsNotEmpty()
  @MaxLength(255)
  @NoNul()
  @NotBlank()
  name: string;

  /** Whether this is the pipeline new deals go to when they name none (default false). Setting it moves the mark from the current default. */
  @IsOptional()
  @IsBoolean()
  @Rule('true only: the default moves to another pipeline by setting isDefault on that one')
  isDefault?: boolean;

  /** true (default): writing a stage name that is not one of the pipeline's to a deal is a 400 listing the stages; false: the name is added as an open stage. */
  @IsOptional()
  @IsBoolean()
  strictStages?: boolean;

  /**
   * The stages in order. In a replace (PUT) or an edit (PATCH), a stage with an `id` keeps that stage
   * (renamed, reordered...), one without is added, and a current stage left out is removed (409 when
   * it holds deals: remove it with `DELETE .../stages/{stageId}?moveDealsTo=` first).
   */
  @IsArray()
  @ArrayNotEmpty()
  @ArrayMaxSize(MAX_STAGES)
  @ValidateNested({ each: true })
  @Type(() => StageInputDto)
  @Rule('at least one open stage; unique names')
  stages: StageInputDto[];
}

/** PATCH body: any subset of the create properties. */
export class UpdatePipelineDto extends PartialType(CreatePipelineDto) {}

/** `POST /api/pipelines/{id}/stages`: a stage added to the pipeline. */
export class AddStageDto extends StageInputDto {
  /** Where the stage goes: its index among the pipeline's stages (default: last). */
  @IsOptional()
  @IsInt()
  @Min(0)
  @Max(MAX_STAGES)
  order?: number;
}

/** `PATCH /api/pipelines/{id}/stages/{stageId}`: rename, change the probability or type, or move the stage. */
export class UpdateStageDto {
  @IsOptional()
  @IsString()
  @IsNotEmpty()
  @MaxLength(255)
  @NoNul()
  @NotBlank()
  name?: string;

  @IsOptional()
  @IsInt()
  @Min(0)
  @Max(100)
  probability?: number;

  @IsOptional()
  @IsIn(STAGE_TYPES)
  @ApiProperty({ enum: STAGE_TYPES, required: false })
  @Rule('the deals in the stage take the new type as their status')
  type?: StageType;

  /** The stage's new index among the pipeline's stages (0 first; past the end: last). */
  @IsOptional()
  @IsInt()
  @Min(0)
  @Max(MAX_STAGES)
  order?: number;
}

export class StageRecordDto {
  id: number;
  name: string;
  /** The stage's index in the pipeline (0 first). */
  order: number;
  probability: number;
  @ApiProperty({ enum: STAGE_TYPES })
  type: string;
}

/** A pipeline as the API returns it. */
export class PipelineRecordDto extends AuditRecordDto {
  id: number;
  name: string;
  isDefault: boolean;
  strictStages: boolean;
  /** In order. */
  @ApiProperty({ type: [StageRecordDto] })
  stages: StageRecordDto[];
}
