import { afterEach, describe, expect, it } from '@jest/globals';
import { waitUntil } from '../../test/support/wait.js';
import { InProcessJobQueue } from './in-process.job-queue.js';
import { DeferJobError, type JobOutcome, RetryableJobError } from './job-queue.js';
import { type JobName, QUEUES } from './job-names.js';

const until = (check: () => boolean, ms = 3000): Promise<boolean> => waitUntil('the check', async () => check(), ms, 5);

describe('InProcessJobQueue: outcomes and depths for the metrics', () => {
  let queue: InProcessJobQueue;
  afterEach(async () => {
    await queue.beforeApplicationShutdown();
  });

  it('reports completed, retried and failed runs (a deferred run is not an outcome)', async () => {
    queue = new InProcessJobQueue();
    const seen: [JobName, JobOutcome][] = [];
    queue.observe((name, outcome) => seen.push([name, outcome]));
    let runs = 0;
    queue.handle('reports.run', async () => {
      runs++;
      if (runs === 1) throw new DeferJobError('not yet', 5);
      if (runs === 2) throw new RetryableJobError('busy', 5);
    });
    queue.handle('sms.recover', async () => {
      throw new RetryableJobError('down', 5);
    });
    await queue.enqueue('reports.run', { reportId: 1, trigger: 'manual' });
    await queue.enqueue('sms.recover', {});
    await until(() => seen.length === 4);
    expect(seen.filter(([n]) => n === 'reports.run')).toEqual([
      ['reports.run', 'retried'],
      ['reports.run', 'completed'],
    ]);
    // sms.recover has 2 attempts: one retry, then final.
    expect(seen.filter(([n]) => n === 'sms.recover')).toEqual([
      ['sms.recover', 'retried'],
      ['sms.recover', 'failed'],
    ]);
  });

  it('answers depths per queue and state, counting waiting, delayed and active jobs', async () => {
    queue = new InProcessJobQueue();
    let release!: () => void;
    const blocked = new Promise<void>((r) => (release = r));
    queue.handle('reports.run', () => blocked);
    await queue.enqueue('reports.run', { reportId: 1, trigger: 'manual' });
    await queue.enqueue('sms.send', { messageId: 1, generation: 1, queuedAt: 0 }, { delayMs: 60_000 });
    const depth = async (q: string, s: string) => (await queue.depths()).find((d) => d.queue === q && d.state === s)?.count;
    await new Promise((r) => setTimeout(r, 20));
    expect(await depth('reports', 'active')).toBe(1);
    expect(await depth('sms', 'delayed')).toBe(1);
    expect(await depth('maintenance', 'waiting')).toBe(0);
    // Every queue in each of the three states, so a gauge reads 0 rather than vanishing.
    const depthsBefore = await queue.depths();
    release();
    expect(depthsBefore).toHaveLength(Object.keys(QUEUES).length * 3);
    await new Promise((r) => setTimeout(r, 20));
    expect(await depth('reports', 'active')).toBe(0);
  });
  it('rerun: a job queued while one with its id runs gets exactly one follow-up run; without rerun it is suppressed', async () => {
    queue = new InProcessJobQueue();
    const runs: number[] = [];
    let release!: () => void;
    const blocked = new Promise<void>((r) => (release = r));
    queue.handle('webhooks.drain', async (p) => {
      runs.push(p.webhookId);
      if (runs.length === 1) await blocked;
    });
    await queue.enqueue('webhooks.drain', { webhookId: 1 }, { jobId: 'drain:1', rerun: true });
    await until(() => runs.length === 1);
    await queue.enqueue('webhooks.drain', { webhookId: 1 }, { jobId: 'drain:1' });
    await new Promise((r) => setTimeout(r, 30));
    expect(runs).toHaveLength(1);
    await queue.enqueue('webhooks.drain', { webhookId: 1 }, { jobId: 'drain:1', rerun: true });
    await queue.enqueue('webhooks.drain', { webhookId: 1 }, { jobId: 'drain:1', rerun: true });
    await until(() => runs.length === 2);
    release();
    await new Promise((r) => setTimeout(r, 30));
    expect(runs).toEqual([1, 1]);
  });

  it('rerun: a job queued for later is brought forward; a later rerun does not push it back', async () => {
    queue = new InProcessJobQueue();
    const runs: number[] = [];
    queue.handle('webhooks.drain', async (p) => {
      runs.push(p.webhookId);
    });
    await queue.enqueue('webhooks.drain', { webhookId: 2 }, { jobId: 'drain:2', delayMs: 60_000 });
    await queue.enqueue('webhooks.drain', { webhookId: 3 }, { jobId: 'drain:3', delayMs: 20 });
    await queue.enqueue('webhooks.drain', { webhookId: 3 }, { jobId: 'drain:3', delayMs: 60_000, rerun: true });
    await queue.enqueue('webhooks.drain', { webhookId: 2 }, { jobId: 'drain:2', rerun: true });
    await until(() => runs.length === 2);
    expect(runs.sort()).toEqual([2, 3]);
  });

  it('a rate-limited queue starts its backlog in order, never more than its limit in any window, the waiting ones counted as waiting', async () => {
    queue = new InProcessJobQueue({ sms: { max: 10, durationMs: 200 } });
    const starts: { id: number; at: number }[] = [];
    queue.handle('sms.send', async (p) => {
      starts.push({ id: p.messageId, at: Date.now() });
    });
    for (let i = 1; i <= 45; i++) await queue.enqueue('sms.send', { messageId: i, generation: 1, queuedAt: 0 });
    await new Promise((r) => setTimeout(r, 20));
    expect(starts).toHaveLength(10);
    expect((await queue.depths()).find((d) => d.queue === 'sms' && d.state === 'waiting')?.count).toBe(35);
    await until(() => starts.length === 45, 5000);
    expect(starts.map((s) => s.id)).toEqual(Array.from({ length: 45 }, (_, i) => i + 1));
    for (let i = 0; i + 10 < starts.length; i++) expect(starts[i + 10].at - starts[i].at).toBeGreaterThanOrEqual(200);
  });
});
