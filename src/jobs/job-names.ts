/**
 * Every queue and job the service runs, each job with its typed payload, and the one place that
 * sets how jobs are retried, kept and de-duplicated. Callers only ever see
 * JobQueue.enqueue(name, payload, options); the processors register handlers by name.
 */
export const QUEUES = {
  maintenance: 'maintenance',
  reports: 'reports',
  sms: 'sms',
  webhooks: 'webhooks',
} as const;
export type QueueName = (typeof QUEUES)[keyof typeof QUEUES];

export interface JobPayloads {
  /** Marks campaigns whose endDate has passed as completed. */
  'campaigns.complete-expired': Record<string, never>;
  /** Computes and stores a report's result. */
  'reports.run': { reportId: number; trigger: 'manual' | 'schedule' };
  /** Re-creates the job schedulers of all reports from the database (worker start and periodically). */
  'reports.sync-schedules': Record<string, never>;
  /**
   * Hands one text message to the SMS provider. `generation` is the message's send counter when
   * the job was queued: a job whose generation is no longer current does nothing. `queuedAt`
   * (epoch ms) bounds how long a job waits for the queueing transaction to become visible.
   */
  'sms.send': { messageId: number; generation: number; queuedAt: number };
  /** Re-queues text messages left `queued` without a job (worker start and periodically). */
  'sms.recover': Record<string, never>;
  /** One attempt of one webhook delivery; `attempt` is the delivery's attempt count when queued (duplicate suppression). */
  'webhooks.deliver': { deliveryId: number; attempt: number };
  /** Deletes events older than EVENT_RETENTION_DAYS from the event feed (hourly). */
  'events.prune': Record<string, never>;
}
export type JobName = keyof JobPayloads;

export const JOB_QUEUE: Record<JobName, QueueName> = {
  'campaigns.complete-expired': QUEUES.maintenance,
  'reports.run': QUEUES.reports,
  'reports.sync-schedules': QUEUES.maintenance,
  'sms.send': QUEUES.sms,
  'sms.recover': QUEUES.maintenance,
  'webhooks.deliver': QUEUES.webhooks,
  'events.prune': QUEUES.maintenance,
};

export interface JobPolicy {
  /** Runs of a job before it counts as failed (the first run included). */
  attempts: number;
  /** Exponential backoff base: retry n waits backoffMs * 2^(n-1), unless the error names a delay. */
  backoffMs: number;
}

/** Attempts and backoff per job. */
export const JOB_POLICY: Record<JobName, JobPolicy> = {
  'campaigns.complete-expired': { attempts: 3, backoffMs: 5_000 },
  'reports.run': { attempts: 3, backoffMs: 5_000 },
  'reports.sync-schedules': { attempts: 3, backoffMs: 5_000 },
  // 2 s, 4 s, 8 s, 16 s, 32 s: a gateway answering 429/5xx gets about a minute before the message fails.
  'sms.send': { attempts: 6, backoffMs: 2_000 },
  'sms.recover': { attempts: 2, backoffMs: 5_000 },
  // HTTP failures are retried by the delivery's own schedule (webhook-retry.ts); these attempts only cover database errors.
  'webhooks.deliver': { attempts: 3, backoffMs: 1_000 },
  'events.prune': { attempts: 2, backoffMs: 60_000 },
};

/** Retention of finished jobs in Redis: bounded by count and age so the queue never grows without end. */
export const JOB_RETENTION = {
  removeOnComplete: { count: 1_000, age: 24 * 3600 },
  removeOnFail: { count: 5_000, age: 7 * 24 * 3600 },
} as const;

/** Duplicate-suppressing job ids and scheduler ids, in one place. */
export const JOB_IDS = {
  /** One job per message and send: a message re-sent after failing gets a new generation. */
  smsSend: (messageId: number, generation: number) => `sms:${messageId}:${generation}`,
  reportSchedule: (reportId: number) => `report-schedule:${reportId}`,
  reportsSyncSchedule: 'reports-sync-schedules',
  smsRecoverSchedule: 'sms-recover',
  /** One job per delivery attempt: a re-queue of the same attempt is suppressed. */
  webhookDeliver: (deliveryId: number, attempt: number) => `webhook:${deliveryId}:${attempt}`,
  eventsPruneSchedule: 'events-prune',
};
