import { ApiProperty } from '@nestjs/swagger';

class ReportStageDto {
  stageId: number;
  name: string;
  @ApiProperty({ enum: ['open', 'won', 'lost'] })
  type: string;
  /** The stage's index in the pipeline. */
  order: number;
}

class ReportTotalsDto {
  count: number;
  value: number;
  /** Sum of value × probability / 100, rounded to cents. */
  weightedValue: number;
}

export class ForecastGroupDto {
  /** With groupBy=month: YYYY-MM of the expected close date. */
  month?: string;
  /** With groupBy=owner: the owner's user id (null: no owner). */
  @ApiProperty({ type: 'integer', nullable: true, required: false })
  ownerId?: number | null;
  count: number;
  value: number;
  weightedValue: number;
}

export class ForecastDto {
  pipelineId: number;
  /** YYYY-MM-DD, inclusive. */
  from: string;
  /** YYYY-MM-DD, inclusive. */
  to: string;
  @ApiProperty({ enum: ['month', 'owner'] })
  groupBy: string;
  ownerId: number | null;
  companyId: number | null;
  groups: ForecastGroupDto[];
  totals: ReportTotalsDto;
}

export class FunnelStageDto extends ReportStageDto {
  /** Deals that entered the stage in the window (entries, when the funnel's `exact` is false). */
  entered: number;
  /** Of those, the deals whose next change went to a stage that is not lost. */
  movedOn: number;
  /** Of those, the deals whose next change went to a lost stage. */
  lost: number;
  /** Share of the deals that entered which later reached a later stage or a won stage (null for won and lost stages, or nothing entered). */
  @ApiProperty({ type: 'number', nullable: true })
  conversionToNext: number | null;
  /** Share of the deals that entered which later reached a won stage (1 for a won stage; null when nothing entered). */
  @ApiProperty({ type: 'number', nullable: true })
  conversionToWon: number | null;
  /** Median time of the finished stays in the stage, in seconds (null: none finished; within 4.9% when the funnel's `exact` is false). */
  @ApiProperty({ type: 'number', nullable: true })
  medianSecondsInStage: number | null;
  /** 90th percentile of the same. */
  @ApiProperty({ type: 'number', nullable: true })
  p90SecondsInStage: number | null;
}

export class FunnelDto {
  pipelineId: number;
  from: string;
  to: string;
  ownerId: number | null;
  companyId: number | null;
  /**
   * true: counts are distinct deals and the median and p90 are exact (filtered funnels, and windows over at most 20,000 ledger
   * rows). false (larger unfiltered windows, read from daily rollups): counts are entries (a deal that entered a stage twice in
   * the window counts twice) and the median and p90 are within 4.9% (0.5 s for stays under a second).
   */
  exact: boolean;
  stages: FunnelStageDto[];
}

export class SnapshotStageDto extends ReportStageDto {
  count: number;
  value: number;
  weightedValue: number;
}

export class SnapshotDto {
  pipelineId: number;
  asOf: string;
  ownerId: number | null;
  companyId: number | null;
  stages: SnapshotStageDto[];
  totals: ReportTotalsDto;
}
