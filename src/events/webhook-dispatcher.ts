import { Inject, Injectable, Logger, type OnModuleDestroy, type OnModuleInit } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { Transactions } from '../database/transactions.js';
import { JobQueue } from '../jobs/job-queue.js';
import { EventsService } from './events.service.js';
import type { NewDelivery } from './webhook-deliveries.repository.js';
import { WebhookDeliveriesRepository } from './webhook-deliveries.repository.js';
import { WebhookDeliveriesService } from './webhook-deliveries.service.js';
import { WebhooksRepository } from './webhooks.repository.js';

/** Events read per dispatch pass. */
const DISPATCH_BATCH = 500;
/** How often the drains of webhooks with due deliveries and no live claim are queued again. */
const SWEEP_EVERY_MS = 5_000;
/** A delivery due for less than this is left to its webhook's drain job. */
const SWEEP_GRACE_MS = 2_000;

/**
 * Turns events into deliveries, in worker processes (APP_ROLE=worker|all; with the in-process
 * runner, every process). A pass locks the one-row cursor (FOR UPDATE SKIP LOCKED: one
 * dispatcher at a time across processes), reads the events after it from EventsService.after,
 * inserts one delivery per matching active webhook (unique per webhook and event, so a repeated
 * pass adds nothing) and advances the cursor, in one transaction; then it queues the drain job of
 * each webhook that got deliveries (one per webhook, not one per delivery). A crash between the
 * commit and the queueing loses nothing: the sweep queues the drain of every webhook with a due
 * delivery that has no live claim, on worker start and every 5 s.
 */
@Injectable()
export class WebhookDispatcher implements OnModuleInit, OnModuleDestroy {
  private readonly logger = new Logger('Webhooks');
  private timer: NodeJS.Timeout | null = null;
  private stopped = false;
  private wake: (() => void) | null = null;
  private loop: Promise<void> | null = null;
  private unsubscribe: (() => void) | null = null;

  constructor(
    private readonly events: EventsService,
    private readonly webhooks: WebhooksRepository,
    private readonly deliveries: WebhookDeliveriesRepository,
    private readonly delivery: WebhookDeliveriesService,
    private readonly transactions: Transactions,
    private readonly jobs: JobQueue,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  onModuleInit(): void {
    this.jobs.handle('webhooks.drain', (p) => this.delivery.drain(p.webhookId));
    this.jobs.onWorkerStart('webhooks: dispatch events and queue due deliveries', async () => {
      if (this.stopped) return;
      await this.delivery.sweep(0);
      this.unsubscribe = this.events.onSequenced(() => this.wake?.());
      this.loop = this.run();
    });
  }

  async onModuleDestroy(): Promise<void> {
    this.stopped = true;
    this.unsubscribe?.();
    if (this.timer) clearTimeout(this.timer);
    this.wake?.();
    await this.loop;
  }

  private async run(): Promise<void> {
    let lastSweep = Date.now();
    while (!this.stopped) {
      try {
        while (!this.stopped && (await this.dispatchOnce()) === DISPATCH_BATCH);
        if (Date.now() - lastSweep >= SWEEP_EVERY_MS) {
          lastSweep = Date.now();
          const n = await this.delivery.sweep(SWEEP_GRACE_MS);
          if (n) this.logger.log({ msg: 'queued due webhook deliveries again', count: n });
        }
      } catch (e) {
        this.logger.warn({ msg: 'webhook dispatch pass failed', err: (e as Error).message });
      }
      // Stopped during the pass: its wake found no sleep to end, so do not begin one (it would hold shutdown for the interval).
      if (this.stopped) break;
      await new Promise<void>((r) => {
        this.wake = r;
        this.timer = setTimeout(r, this.config.webhookDispatchIntervalMs);
        this.timer.unref?.();
      });
      this.wake = null;
    }
  }

  /** One pass; answers how many events it read. */
  async dispatchOnce(): Promise<number> {
    let read = 0;
    // Number what has committed before taking the cursor's lock: the sequencer uses a connection of its own.
    await this.events.sequenceNow(true);
    const created = await this.transactions.run(async (tx) => {
      const cursor = await this.webhooks.lockCursor(tx);
      if (cursor === null) return []; // another process is dispatching
      // The end of the feed first, the webhooks after it (a later snapshot), as the events and then the
      // webhooks are read below: with no active webhook, no event up to that end would become a delivery,
      // so the cursor moves there without reading them (an import of a million contacts would otherwise
      // have each of its events read and parsed here for nothing).
      const last = await this.events.lastSequenceIn(tx);
      const subs = await this.webhooks.activeSubscriptions(tx);
      if (!subs.length) {
        if (last > cursor) await this.webhooks.advanceCursor(last, tx);
        return [];
      }
      // Only events numbered by the time the webhooks were read (up to `last`): one numbered since may
      // belong to a webhook created meanwhile, which the next pass sees.
      const fetched = await this.events.afterIn(tx, cursor, DISPATCH_BATCH);
      read = fetched.length;
      const events = fetched.filter((e) => e.sequence <= last);
      if (!events.length) return [];
      const rows: NewDelivery[] = [];
      for (const e of events) {
        let body: string | null = null;
        const occurredMs = Date.parse(e.occurredAt);
        for (const s of subs) {
          // A webhook receives the events that occurred since it was created, not the backlog before it.
          if (occurredMs < s.createdMs) continue;
          if (!s.events.includes('*') && !s.events.includes(e.type)) continue;
          body ??= JSON.stringify({ id: e.id, type: e.type, occurredAt: e.occurredAt, sequence: e.sequence, data: e.data, previous: e.previous });
          rows.push({ webhookId: s.id, eventId: e.id, eventType: e.type, sequence: e.sequence, body });
        }
      }
      const webhookIds = await this.deliveries.insertMany(rows, tx);
      await this.webhooks.advanceCursor(events[events.length - 1].sequence, tx);
      return webhookIds;
    });
    await this.delivery.queueDrainsQuietly(created);
    return read;
  }
}
