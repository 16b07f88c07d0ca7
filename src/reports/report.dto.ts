import { PartialType } from '@nestjs/swagger';
import { ArrayMaxSize, IsArray, IsBoolean, IsIn, IsNotEmpty, IsObject, IsOptional, IsString, MaxLength } from 'class-validator';
import { NoNul } from '../common/validation.js';
import { REPORT_SCHEDULES, REPORT_TYPES } from './report-definition.js';
import type { ReportSchedule, ReportType } from './report-definition.js';
import { NotBlank, Rule } from '../common/documented-rules.js';

export class CreateReportDto {
  /** Report name. */
  @IsString()
  @IsNotEmpty()
  @MaxLength(255)
  @NoNul()
  @NotBlank()
  name: string;

  @IsOptional()
  @IsString()
  @MaxLength(5000)
  @NoNul()
  description?: string | null;

  /** `sales` (won deals) or `marketing` (campaigns, members and text messages). */
  @IsIn(REPORT_TYPES)
  type: ReportType;

  /**
   * `daily` (00:00 UTC), `weekly` (Mondays 00:00 UTC) or `monthly` (the 1st, 00:00 UTC); omitted or
   * null: the report runs only on demand. Unpublished reports do not run on their schedule.
   */
  @IsOptional()
  @IsIn(REPORT_SCHEDULES)
  schedule?: ReportSchedule | null;

  /** Default true. */
  @IsOptional()
  @IsBoolean()
  isPublished?: boolean;

  /**
   * sales: `dateRange` (today, last_7_days, last_30_days, this_month, last_month, this_year, or
   * `YYYY-MM-DD..YYYY-MM-DD`; UTC days, evaluated when the report runs, on the deals' close time),
   * `salesTeam` (the deal owner's team), `products` (array of product names).
   * marketing: `dateRange` (members by the time they were added, text messages by creation time).
   * Default `{}` (everything).
   */
  @IsOptional()
  @IsObject()
  @Rule('the filters of the report type (sales: dateRange, salesTeam, products), each with its value type')
  filters?: Record<string, unknown>;

  /**
   * Columns of the result rows, in order. sales: date, product, salesperson, revenue, quantity
   * (rows are grouped by the dimension columns shown). marketing: campaignId, campaign, members,
   * messages, draft, queued, sent, delivered, failed. Default: all columns of the type.
   */
  @IsOptional()
  @IsArray()
  @ArrayMaxSize(20)
  @IsString({ each: true })
  @Rule('columns of the report type')
  columns?: string[];
}

/** PATCH body: any subset of the create properties. */
export class UpdateReportDto extends PartialType(CreateReportDto) {}

/** Filter settings of a report. */
export class ReportFiltersDto {
  dateRange?: string;
  salesTeam?: string;
  products?: string[];
}

/** A report as the API returns it. */
export class ReportRecordDto {
  id: number;
  name: string;
  description: string | null;
  /** sales or marketing */
  type: string;
  isPublished: boolean;
  /** daily, weekly, monthly, or null (on demand only) */
  schedule: string | null;
  /** When the last run finished. */
  lastRun: string | null;
  /** When the schedule runs the report next; null without a schedule or while unpublished. */
  nextRun: string | null;
  createdAt: string;
  modifiedAt: string | null;
  createdBy: number | null;
  createdByUser: string | null;
  modifiedBy: number | null;
  modifiedByUser: string | null;
  filters: ReportFiltersDto;
  columns: string[];
}

/** Answer of POST /api/reports/{id}/run. */
export class ReportRunDto {
  /** Always `queued`. */
  status: string;
  message: string;
  /** Id of the queued job. */
  jobId: string;
}

/** Latest stored result of a report. */
export class ReportResultDto {
  generatedAt: string;
  /** Rows with the report's columns (as they were when it ran). */
  data: Record<string, unknown>[];
  /**
   * sales: totalRevenue, totalQuantity (over all matching deals), rowCount, truncated.
   * marketing: totalCampaigns, totalMembers, totalMessages, messagesByStatus, rowCount, truncated.
   */
  summary: Record<string, unknown>;
}

export class ReportResultsEnvelopeDto {
  results: ReportResultDto;
}
