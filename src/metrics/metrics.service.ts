import { Injectable } from '@nestjs/common';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { JobQueue, type QueueDepth } from '../jobs/job-queue.js';

interface Series {
  count: { inc(): void };
  time: { observe(v: number): void };
}

/**
 * Prometheus metrics of this process: HTTP request rates and latencies by route, process metrics,
 * and job counters and queue depths that the job layer reports through this service.
 */
@Injectable()
export class MetricsService {
  readonly registry = new Registry();

  readonly httpRequests = new Counter({
    name: 'http_requests_total',
    help: 'HTTP requests by method, route pattern and status',
    labelNames: ['method', 'route', 'status'] as const,
    registers: [this.registry],
  });

  readonly httpDuration = new Histogram({
    name: 'http_request_duration_seconds',
    help: 'HTTP request latency by method and route pattern',
    labelNames: ['method', 'route'] as const,
    buckets: [0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });

  readonly jobs = new Counter({
    name: 'jobs_total',
    help: 'Jobs processed by this process, by job name and outcome (completed, failed, retried)',
    labelNames: ['name', 'outcome'] as const,
    registers: [this.registry],
  });

  readonly queueDepth = new Gauge({
    name: 'queue_jobs',
    help: 'Jobs in each queue by state (waiting, active, delayed, failed)',
    labelNames: ['queue', 'state'] as const,
    registers: [this.registry],
  });

  readonly smsDuplicatesRefused = new Counter({
    name: 'sms_duplicates_refused_total',
    help: 'Hand-overs to the SMS provider refused by this process as duplicates (an Idempotency-Key already taken; the log provider)',
    labelNames: ['provider'] as const,
    registers: [this.registry],
  });

  /** Reads queue depths when metrics are scraped (the job layer's). */
  private depthReader: (() => Promise<QueueDepth[]>) | null = null;

  /**
   * Subscribes to the job layer: every finished run counts in jobs_total, and each scrape reads
   * the queue depths (BullMQ's counts in Redis, or the in-process runner's pending jobs).
   */
  constructor(jobs: JobQueue) {
    collectDefaultMetrics({ register: this.registry });
    jobs.observe((name, outcome) => this.recordJob(name, outcome));
    this.setQueueDepthReader(() => jobs.depths());
  }

  setQueueDepthReader(reader: () => Promise<QueueDepth[]>): void {
    this.depthReader = reader;
  }

  /**
   * The labelled series of each route pattern, method and status, resolved once (routes are a
   * bounded set) and found by three lookups, without building a key string per request.
   */
  private readonly series = new Map<string, Map<string, Map<number, Series>>>();

  recordRequest(method: string, route: string, status: number, seconds: number): void {
    let byMethod = this.series.get(route);
    if (!byMethod) this.series.set(route, (byMethod = new Map<string, Map<number, Series>>()));
    let byStatus = byMethod.get(method);
    if (!byStatus) byMethod.set(method, (byStatus = new Map<number, Series>()));
    let s = byStatus.get(status);
    if (!s) {
      s = { count: this.httpRequests.labels(method, route, String(status)), time: this.httpDuration.labels(method, route) };
      byStatus.set(status, s);
    }
    s.count.inc();
    s.time.observe(seconds);
  }

  recordJob(name: string, outcome: 'completed' | 'failed' | 'retried'): void {
    this.jobs.inc({ name, outcome });
  }

  async render(): Promise<{ contentType: string; body: string }> {
    if (this.depthReader) {
      try {
        this.queueDepth.reset();
        for (const d of await this.depthReader()) this.queueDepth.set({ queue: d.queue, state: d.state }, d.count);
      } catch {
        /* the broker is unreachable: depths are left out of this scrape */
      }
    }
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }
}
