import { describe, expect, it } from '@jest/globals';
import { Coalescer } from './coalescer.js';

describe('Coalescer', () => {
  it('gathers the calls of one moment into one batch and answers each its own result, in order', async () => {
    const batches: number[][] = [];
    const c = new Coalescer(async (items: number[]) => {
      batches.push(items);
      return items.map((i) => i * 10);
    });
    expect(await Promise.all([1, 2, 3].map((i) => c.add(i)))).toEqual([10, 20, 30]);
    expect(batches).toEqual([[1, 2, 3]]);
  });

  it('gathers the calls made while a batch is in flight into the next one, and keeps batches under the maximum', async () => {
    const batches: number[][] = [];
    let release: () => void = () => undefined;
    const gate = new Promise<void>((r) => (release = r));
    const c = new Coalescer(async (items: number[]) => {
      batches.push(items);
      if (batches.length === 1) await gate;
      return items;
    }, 2);
    const first = c.add(1);
    await new Promise((r) => setImmediate(r));
    const later = [2, 3, 4].map((i) => c.add(i));
    release();
    expect(await Promise.all([first, ...later])).toEqual([1, 2, 3, 4]);
    expect(batches).toEqual([[1], [2, 3], [4]]);
  });

  it("fails every call of a failed batch with the batch's error, and serves the next batch normally", async () => {
    let fail = true;
    const c = new Coalescer(async (items: string[]) => {
      if (fail) throw new Error('database went away');
      return items.map((s) => s.toUpperCase());
    });
    const failed = await Promise.allSettled([c.add('a'), c.add('b')]);
    expect(failed.map((r) => (r.status === 'rejected' ? (r.reason as Error).message : 'ok'))).toEqual(['database went away', 'database went away']);
    fail = false;
    expect(await c.add('c')).toBe('C');
  });

  it("refuses a batch answer of the wrong length (no caller gets another caller's result)", async () => {
    const c = new Coalescer(async (items: number[]) => items.slice(1));
    await expect(Promise.all([c.add(1), c.add(2)])).rejects.toThrow(/answered 1 results/);
  });
});
