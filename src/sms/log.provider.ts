import { Logger } from '@nestjs/common';
import type { MetricsService } from '../metrics/metrics.service.js';
import { type OutboundSms, type SendResult, SmsProvider, SmsProviderError } from './sms-provider.js';
import type { LogHandOver, LogSendRow, SmsLogSendsRepository } from './sms-log-sends.repository.js';
import { outsideTransaction } from '../database/transactions.js';

/** Hand-overs recorded per statement at most. */
const RECORD_BATCH = 500;
/** Keys are kept this long: no send is handed over again that late (a broadcast's claims go stale in seconds). */
const KEEP_KEYS_DAYS = 7;
const PRUNE_EVERY_MS = 3600_000;

interface Waiting {
  sms: OutboundSms;
  resolve: (r: SendResult) => void;
  reject: (e: unknown) => void;
}

/**
 * The default provider (SMS_PROVIDER=log): writes the send to the log instead of a gateway and
 * reports the message delivered at once. For development and installations without a gateway.
 *
 * It keeps the SMS provider contract that makes broadcasts exactly once (README "SMS provider
 * contract"), as a gateway must: every Idempotency-Key it takes is recorded in the database
 * (sms_log_sends, shared by every worker process and kept across restarts), and a second hand-over
 * with a key already taken — a message handed over again after its worker died mid-send — is not
 * sent again: it is answered with the first hand-over's result, logged as a refused duplicate and
 * counted (`duplicates` of its row, and the metric sms_duplicates_refused_total of this process).
 * Hand-overs arriving together (a lane has 64 in flight) are recorded in one statement.
 */
export class LogSmsProvider extends SmsProvider {
  readonly name = 'log';
  readonly maxCallMs = 1_000;
  private readonly logger = new Logger('SMS');
  private pending: Waiting[] = [];
  private flushing = false;
  private lastPrune = 0;
  /** Duplicates this process refused (the log's running count). */
  private refused = 0;

  constructor(
    private readonly sends: SmsLogSendsRepository,
    private readonly metrics: MetricsService | null = null,
  ) {
    super();
  }

  send(sms: OutboundSms): Promise<SendResult> {
    return new Promise<SendResult>((resolve, reject) => {
      this.pending.push({ sms, resolve, reject });
      if (!this.flushing) {
        this.flushing = true;
        // The batch records the sends of every caller: outside the first caller's unit of work.
        outsideTransaction(() => setImmediate(() => void this.flush()));
      }
    });
  }

  private async flush(): Promise<void> {
    try {
      while (this.pending.length) {
        const batch = this.pending.splice(0, RECORD_BATCH);
        await this.recordBatch(batch);
      }
    } finally {
      this.flushing = false;
    }
    await this.pruneNow();
  }

  private async recordBatch(batch: Waiting[]): Promise<void> {
    const byKey = new Map<string, Waiting[]>();
    for (const w of batch) {
      const same = byKey.get(w.sms.idempotencyKey);
      if (same) same.push(w);
      else byKey.set(w.sms.idempotencyKey, [w]);
    }
    const handOvers: LogHandOver[] = [...byKey.values()].map((ws) => ({
      idempotencyKey: ws[0].sms.idempotencyKey,
      messageId: ws[0].sms.messageId,
      count: ws.length,
    }));
    let rows: LogSendRow[];
    try {
      rows = await this.sends.record(handOvers);
    } catch (e) {
      // Nothing was taken: the sender sees the provider unavailable and tries again later with the same key.
      const error = new SmsProviderError(`log provider could not record the hand-over: ${(e as Error).message}`, 'retryable');
      for (const w of batch) w.reject(error);
      return;
    }
    for (const row of rows) {
      const ws = byKey.get(row.idempotencyKey) ?? [];
      const result: SendResult = { providerMessageId: `log-${row.idempotencyKey}`, delivery: { status: 'delivered', at: row.acceptedAt } };
      ws.forEach((w, i) => {
        if (row.first && i === 0) this.logSend(w.sms);
        else this.logDuplicate(w.sms, row.duplicates);
        w.resolve(result);
      });
    }
  }

  private logSend(sms: OutboundSms): void {
    // The number is partly masked: logs are no place for full phone numbers.
    this.logger.log({
      msg: 'sms (log provider)',
      messageId: sms.messageId,
      to: sms.to.slice(0, -4) + '****',
      chars: sms.body.length,
      idempotencyKey: sms.idempotencyKey,
    });
  }

  private logDuplicate(sms: OutboundSms, duplicatesOfKey: number): void {
    this.refused++;
    this.metrics?.smsDuplicatesRefused.inc({ provider: this.name });
    this.logger.warn({
      msg: 'sms (log provider): duplicate hand-over refused, not sent again',
      messageId: sms.messageId,
      idempotencyKey: sms.idempotencyKey,
      duplicatesOfKey,
      duplicatesRefusedByThisProcess: this.refused,
    });
  }

  /** Forgets old keys, at most once an hour per process. */
  private async pruneNow(): Promise<void> {
    if (Date.now() - this.lastPrune < PRUNE_EVERY_MS) return;
    this.lastPrune = Date.now();
    try {
      const n = await this.sends.prune(KEEP_KEYS_DAYS);
      if (n) this.logger.log({ msg: 'log provider: forgot old Idempotency-Keys', keys: n, olderThanDays: KEEP_KEYS_DAYS });
    } catch (e) {
      this.logger.warn({ msg: 'log provider: could not prune old Idempotency-Keys', err: (e as Error).message });
    }
  }
}
