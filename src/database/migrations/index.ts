/**
 * Every migration, in order. ESM builds cannot glob-load classes, so each migration is listed here
 * (timestamps keep the order; TypeORM sorts by them too).
 */
import { Platform1763700000000 } from './1763700000000-platform.js';
import { CrmTables1763700000050 } from './1763700000050-crm-tables.js';
import { Catalog1763700000100 } from './1763700000100-catalog.js';
import { Assets1763700000300 } from './1763700000300-assets.js';
import { ReportsTextMessages1763700000400 } from './1763700000400-reports-text-messages.js';
import { RowCounts1763700000600 } from './1763700000600-row-counts.js';
import { TokenParents1763700000700 } from './1763700000700-token-parents.js';
import { AccountConsole1763700000800 } from './1763700000800-account-console.js';
import { Events1763700000900 } from './1763700000900-events.js';
import { ModifiedSince1763700000910 } from './1763700000910-modified-since.js';
import { Webhooks1763700000950 } from './1763700000950-webhooks.js';
import { ModifiedAtOnCreation1763700000960 } from './1763700000960-modified-at-on-creation.js';
import { Companies1763700001000 } from './1763700001000-companies.js';
import { FilterIndexes1763700001100 } from './1763700001100-filter-indexes.js';
import { IdempotencyKeys1763700001200 } from './1763700001200-idempotency-keys.js';
import { SmsOptOut1763700001300 } from './1763700001300-sms-opt-out.js';
import { Broadcasts1763700001310 } from './1763700001310-broadcasts.js';
import { WebhookDrain1763700001400 } from './1763700001400-webhook-drain.js';
import { CompanyFilterIndexes1763700001500 } from './1763700001500-company-filter-indexes.js';
import { Segments1763700001600 } from './1763700001600-segments.js';
import { ImportsExports1763700001700 } from './1763700001700-imports-exports.js';
import { ImportChunks1763700001710 } from './1763700001710-import-chunks.js';
import { BroadcastCounts1763700001800 } from './1763700001800-broadcast-counts.js';
import { ContactTextIndex1763700001910 } from './1763700001910-contact-text-index.js';
import { SmsLogSends1763700002600 } from './1763700002600-sms-log-sends.js';
import { JobCredentials1763700002610 } from './1763700002610-job-credentials.js';
import { IdempotencyCredential1763700002620 } from './1763700002620-idempotency-credential.js';
import { JobRuns1763700002630 } from './1763700002630-job-runs.js';
import { EventTransactions1763700002640 } from './1763700002640-event-transactions.js';
import { TrackedEvents1763700002700 } from './1763700002700-tracked-events.js';
import { Scoring1763700002800 } from './1763700002800-scoring.js';
import { Workflows1763700002900 } from './1763700002900-workflows.js';
import { Pipelines1763700003000 } from './1763700003000-pipelines.js';
import { ApiUsage1763700003100 } from './1763700003100-api-usage.js';
import { TrackedEventQueue1763700003150 } from './1763700003150-tracked-event-queue.js';
import { WorkflowEventWaits1763700003300 } from './1763700003300-workflow-event-waits.js';
import { WorkflowSegmentEnrolments1763700003850 } from './1763700003850-workflow-segment-enrolments.js';
import { TextMessageIdempotentHandover1763700004000 } from './1763700004000-text-message-idempotent-handover.js';
import { ContactPointsHot1763700004100 } from './1763700004100-contact-points-hot.js';
import { ConsoleImportUploads1763700003400 } from './1763700003400-console-import-uploads.js';
import { TrackedIntake1763700003500 } from './1763700003500-tracked-intake.js';
import { ContactRecordHistory1763700003510 } from './1763700003510-contact-record-history.js';
import { DealStageTotals1763700003700 } from './1763700003700-deal-stage-totals.js';
import { DealFunnelRollups1763700003710 } from './1763700003710-deal-funnel-rollups.js';
import { DealForecastMonths1763700003720 } from './1763700003720-deal-forecast-months.js';
import { DealSnapshotDays1763700003730 } from './1763700003730-deal-snapshot-days.js';

export const MIGRATIONS = [
  Platform1763700000000,
  CrmTables1763700000050,
  Catalog1763700000100,
  Assets1763700000300,
  ReportsTextMessages1763700000400,
  RowCounts1763700000600,
  TokenParents1763700000700,
  AccountConsole1763700000800,
  Events1763700000900,
  ModifiedSince1763700000910,
  Webhooks1763700000950,
  ModifiedAtOnCreation1763700000960,
  Companies1763700001000,
  FilterIndexes1763700001100,
  IdempotencyKeys1763700001200,
  SmsOptOut1763700001300,
  Broadcasts1763700001310,
  WebhookDrain1763700001400,
  CompanyFilterIndexes1763700001500,
  Segments1763700001600,
  ImportsExports1763700001700,
  ImportChunks1763700001710,
  BroadcastCounts1763700001800,
  ContactTextIndex1763700001910,
  SmsLogSends1763700002600,
  JobCredentials1763700002610,
  IdempotencyCredential1763700002620,
  JobRuns1763700002630,
  EventTransactions1763700002640,
  TrackedEvents1763700002700,
  Scoring1763700002800,
  Workflows1763700002900,
  Pipelines1763700003000,
  ApiUsage1763700003100,
  TrackedEventQueue1763700003150,
  WorkflowEventWaits1763700003300,
  ConsoleImportUploads1763700003400,
  TrackedIntake1763700003500,
  ContactRecordHistory1763700003510,
  DealStageTotals1763700003700,
  DealFunnelRollups1763700003710,
  DealForecastMonths1763700003720,
  DealSnapshotDays1763700003730,
  WorkflowSegmentEnrolments1763700003850,
  TextMessageIdempotentHandover1763700004000,
  ContactPointsHot1763700004100,
];
