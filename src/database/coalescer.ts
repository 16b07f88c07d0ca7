import { outsideTransaction } from './transactions.js';

interface Waiting<I, O> {
  item: I;
  resolve: (o: O) => void;
  reject: (e: unknown) => void;
}

/**
 * Gathers the calls made in the same moment into one batch call: one statement (or one Redis
 * pipeline) for many callers instead of one round trip each. A call waits at most one event-loop
 * turn when nothing is in flight; while a batch is in flight, the next calls gather for the one after
 * it, so under load a batch carries many. Each caller gets its own answer, or the batch's error.
 *
 * `run` answers one result per item, in the items' order. It runs outside the first caller's unit of
 * work (the batch serves every caller, so it takes a connection of its own), which makes a coalescer
 * only for work that is its own unit: a caller must not need the batch inside its transaction.
 */
export class Coalescer<I, O> {
  private pending: Waiting<I, O>[] = [];
  private flushing = false;

  constructor(
    private readonly run: (items: I[]) => Promise<O[]>,
    private readonly maxBatch = 500,
  ) {}

  /** Adds `item` to the next batch; resolves with its result. */
  add(item: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      this.pending.push({ item, resolve, reject });
      if (this.flushing) return;
      this.flushing = true;
      outsideTransaction(() => setImmediate(() => void this.flush()));
    });
  }

  private async flush(): Promise<void> {
    try {
      while (this.pending.length) {
        const batch = this.pending.splice(0, this.maxBatch);
        try {
          const out = await this.run(batch.map((w) => w.item));
          if (out.length !== batch.length) throw new Error(`a batch of ${batch.length} answered ${out.length} results`);
          batch.forEach((w, i) => w.resolve(out[i]));
        } catch (e) {
          for (const w of batch) w.reject(e);
        }
      }
    } finally {
      this.flushing = false;
    }
  }
}
