/**
 * Every queue and job the service runs, each job with its typed payload. Callers only ever see
 * JobQueue.enqueue(name, payload, options); the processors register handlers by name.
 */
export const QUEUES = {
  maintenance: 'maintenance',
  reports: 'reports',
  sms: 'sms',
} as const;
export type QueueName = (typeof QUEUES)[keyof typeof QUEUES];

export interface JobPayloads {
  /** Marks campaigns whose endDate has passed as completed. */
  'campaigns.complete-expired': Record<string, never>;
  /** Computes and stores a report's result. */
  'reports.run': { reportId: number; trigger: 'manual' | 'schedule' };
  /** Hands one text message to the SMS provider. */
  'sms.send': { messageId: number };
}
export type JobName = keyof JobPayloads;

export const JOB_QUEUE: Record<JobName, QueueName> = {
  'campaigns.complete-expired': QUEUES.maintenance,
  'reports.run': QUEUES.reports,
  'sms.send': QUEUES.sms,
};
