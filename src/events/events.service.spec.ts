import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { startServiceContext, type ServiceContext } from '../../test/support/service-testing.js';
import { Transactions } from '../database/transactions.js';
import type { EventRecord } from './event-types.js';
import { EventsRepository } from './events.repository.js';
import { EventsService, SEQUENCER_INTERVAL_MS } from './events.service.js';

describe('EventsService (service layer, real PostgreSQL)', () => {
  let ctx: ServiceContext;
  let events: EventsService;
  let transactions: Transactions;
  beforeAll(async () => {
    ctx = await startServiceContext({ DATABASE_POOL_SIZE: '20' });
    events = ctx.get(EventsService);
    transactions = ctx.get(Transactions);
  });
  afterAll(async () => {
    await ctx.close();
  });

  async function readAll(from: number, types?: string[]): Promise<EventRecord[]> {
    const out: EventRecord[] = [];
    let cursor = from;
    for (;;) {
      const page = await events.after(cursor, 500, types);
      if (!page.length) return out;
      out.push(...page);
      cursor = page[page.length - 1].sequence;
    }
  }

  it('writes an event with its transaction and none when the transaction rolls back', async () => {
    const start = (await readAll(0)).at(-1)?.sequence ?? 0;
    await transactions.run((tx) => events.record(tx, 'category.created', { id: 1, title: 'kept' }));
    await expect(
      transactions.run(async (tx) => {
        await events.record(tx, 'category.created', { id: 2, title: 'rolled back' });
        throw new Error('change failed');
      }),
    ).rejects.toThrow('change failed');
    const seen = await readAll(start);
    expect(seen.map((e) => e.data)).toEqual([{ id: 1, title: 'kept' }]);
    expect(seen[0]).toMatchObject({ type: 'category.created', previous: null, sequence: expect.any(Number) });
    expect(typeof seen[0].id).toBe('string');
    expect(new Date(seen[0].occurredAt).toISOString()).toBe(seen[0].occurredAt);
  });

  it('keeps the order of several events of one transaction and filters by type', async () => {
    const start = (await readAll(0)).at(-1)?.sequence ?? 0;
    await transactions.run(async (tx) => {
      await events.record(tx, 'deal.updated', { id: 7 }, { stage: 'lead' });
      await events.record(tx, 'deal.stage_changed', { id: 7 }, { stage: 'lead' });
      await events.record(tx, 'deal.won', { id: 7 }, { stage: 'lead' });
    });
    expect((await readAll(start)).map((e) => e.type)).toEqual(['deal.updated', 'deal.stage_changed', 'deal.won']);
    expect((await readAll(start, ['deal.won'])).map((e) => e.type)).toEqual(['deal.won']);
  });

  it('numbers events in the order they become visible: a reader paging with after() never misses one committed late', async () => {
    const start = (await readAll(0)).at(-1)?.sequence ?? 0;
    // A transaction that records first and commits last: its event must come after the others.
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const slow = transactions.run(async (tx) => {
      await events.record(tx, 'contact.updated', { id: 0, slow: true });
      await held;
    });
    await new Promise((r) => setTimeout(r, 50));
    await transactions.run((tx) => events.record(tx, 'contact.updated', { id: 1 }));
    const early = await readAll(start);
    expect(early.map((e) => e.data)).toEqual([{ id: 1 }]);
    release();
    await slow;
    const late = await readAll(early[0].sequence);
    expect(late.map((e) => e.data)).toEqual([{ id: 0, slow: true }]);
    expect(late[0].sequence).toBeGreaterThan(early[0].sequence);
  });

  it('1,000 concurrent writers: 1,000 events, strictly increasing, none missed or duplicated by a reader paging meanwhile', async () => {
    const start = (await readAll(0)).at(-1)?.sequence ?? 0;
    const seen: EventRecord[] = [];
    let cursor = start;
    // When the writers are done; the sequencer numbers their last events a moment later, so the reader
    // keeps paging until it has all 1,000 or 10 s have passed since (then the assertions below fail).
    let doneAt: number | null = null;
    const reader = (async () => {
      while (seen.length < 1000) {
        const page = await events.after(cursor, 100, ['contact.updated']);
        seen.push(...page);
        if (page.length) cursor = page[page.length - 1].sequence;
        else if (doneAt !== null && Date.now() - doneAt > 10_000) break;
        else await new Promise((r) => setTimeout(r, 5));
      }
    })();
    await Promise.all(
      Array.from({ length: 1000 }, (_, i) =>
        transactions.run(async (tx) => {
          // Uneven transaction lengths, so commit order differs from insert order.
          if (i % 7 === 0) await tx.query(`SELECT pg_sleep(0.01)`);
          await events.record(tx, 'contact.updated', { id: i });
        }),
      ),
    );
    doneAt = Date.now();
    await reader;
    expect(seen).toHaveLength(1000);
    expect(new Set(seen.map((e) => (e.data as { id: number }).id)).size).toBe(1000);
    expect(new Set(seen.map((e) => e.id)).size).toBe(1000);
    for (let i = 1; i < seen.length; i++) expect(seen[i].sequence).toBeGreaterThan(seen[i - 1].sequence);
    expect(await readAll(start, ['contact.updated'])).toEqual(seen);
  });

  it('callers of sequenceNow arriving together share passes, each seeing what it committed before calling', async () => {
    const start = (await readAll(0)).at(-1)?.sequence ?? 0;
    const spy = jest.spyOn(ctx.get(EventsRepository), 'sequence');
    try {
      const n = 40;
      const seenOwn = await Promise.all(
        Array.from({ length: n }, async (_, i) => {
          await transactions.run((tx) => events.record(tx, 'category.created', { id: 5000 + i, title: 'coalesced' }));
          await events.sequenceNow(true);
          // Read without numbering: the pass this caller waited for must have numbered its event.
          const numbered = await transactions.run((tx) => events.afterIn(tx, start, 10_000));
          return numbered.some((e) => (e.data as { id: number }).id === 5000 + i);
        }),
      );
      expect(seenOwn).toEqual(Array(n).fill(true));
      const onDemand = spy.mock.calls.filter(([wait]) => wait).length;
      expect(onDemand).toBeGreaterThan(0);
      expect(onDemand).toBeLessThan(n);
    } finally {
      spy.mockRestore();
    }
  });

  it('tells its listeners about numbered events at most once per sequencer interval, and always after the last', async () => {
    const calls: number[] = [];
    const unsubscribe = events.onSequenced(() => calls.push(performance.now()));
    try {
      for (let i = 0; i < 15; i++) {
        await transactions.run((tx) => events.record(tx, 'category.created', { id: 6000 + i, title: 'notified' }));
        await events.sequenceNow(true);
      }
      const lastPass = performance.now();
      await new Promise((r) => setTimeout(r, SEQUENCER_INTERVAL_MS * 3));
      expect(calls.length).toBeGreaterThan(0);
      expect(calls.at(-1)).toBeGreaterThanOrEqual(lastPass - SEQUENCER_INTERVAL_MS);
      for (let i = 1; i < calls.length; i++) expect(calls[i] - calls[i - 1]).toBeGreaterThanOrEqual(SEQUENCER_INTERVAL_MS - 5);
    } finally {
      unsubscribe();
    }
  });

  it('prunes by sequence and remembers what it removed', async () => {
    const last = (await readAll(0)).at(-1)!.sequence;
    await transactions.run((tx) => events.record(tx, 'category.deleted', { id: 3 }));
    await events.sequenceNow();
    await ctx.query(`UPDATE event_transactions SET at = now() - interval '8 days' WHERE last_sequence <= $1`, [last]);
    expect(await events.prune(7)).toBeGreaterThanOrEqual(1);
    expect(await events.prunedThrough()).toBe(last);
    expect((await readAll(0)).map((e) => e.type)).toEqual(['category.deleted']);
  });
});
