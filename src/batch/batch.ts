/**
 * Batch writes (docs/decisions/batch-writes.md): the engine every `POST /api/<resource>/batch` route shares. A
 * resource turns each item into a plan (its within-batch key and the single-record service call to
 * make); the runner runs them in one transaction, each item in its own savepoint, and answers each
 * item's status and error exactly as the single-record route would have: the same validation pipe,
 * the same service methods, the same constraint translation as the global exception filter.
 */
import { Injectable, type Type } from '@nestjs/common';
import { Transactions, type Tx } from '../database/transactions.js';
import { BATCH_MAX_ITEMS, type BatchMode, type BatchWriteDto } from './batch.dto.js';
import { AppError, type ErrorDetail } from '../common/errors.js';
import { errorAnswer } from '../server/http-exception.filter.js';
import { parseId } from '../common/id.pipe.js';
import type { Principal } from '../common/request.js';
import { AppValidationPipe } from '../server/validation.pipe.js';

export interface BatchOutcome {
  kind: 'created' | 'updated' | 'deleted';
  id: number;
}

export interface BatchPlan {
  /** Refused before anything runs (the item is not an object, its id is malformed, ...). */
  error?: unknown;
  /** A value at most one item of the batch may name (an email, an id): the later item fails 409. */
  key?: { field: string; value: string };
  run?: (tx: Tx) => Promise<BatchOutcome>;
  /** Set by a resource's set-based fast path (in `before`): the item is written already; `run` is skipped. */
  done?: BatchOutcome;
}

export interface BatchItemError {
  code: string;
  message: string;
  status: number;
  details?: ErrorDetail[];
}

export interface BatchItemResult {
  index: number;
  status: number;
  id?: number;
  error?: BatchItemError;
}

export interface BatchAnswer {
  results: BatchItemResult[];
  summary: { created: number; updated: number; deleted: number; failed: number };
}

const STATUS_OF: Record<BatchOutcome['kind'], number> = { created: 201, updated: 200, deleted: 200 };

/** More than 500 items is a 413 naming the limit (before any item is looked at). */
export function assertBatchSize(items: readonly unknown[], max = BATCH_MAX_ITEMS, what = 'items'): void {
  if (items.length > max) {
    throw new AppError('payload_too_large', `A batch takes at most ${max} ${what}; this one has ${items.length}`, [
      { field: what, message: `must hold at most ${max} entries`, limit: max },
    ]);
  }
}

/**
 * A batch route needs the resource's write permission; mode delete needs its delete permission too,
 * as the single-record DELETE does (403 otherwise).
 */
export function assertBatchPermission(dto: BatchWriteDto, who: Principal, deletePermission: string): void {
  if (dto.mode !== 'delete') return;
  if (who.permissions.has('*') || who.permissions.has(deletePermission)) return;
  throw new AppError('forbidden', `The token lacks the permission "${deletePermission}" (batch mode delete)`);
}

/** An item that is not a JSON object is refused like a single-record body that is not one. */
export function itemObject(item: unknown): Record<string, unknown> {
  if (item === null || typeof item !== 'object' || Array.isArray(item)) {
    throw new AppError('validation_failed', 'The item must be a JSON object', [{ field: 'body', message: 'must be a JSON object' }]);
  }
  return item as Record<string, unknown>;
}

/** The item's `id` (required, a positive 32-bit integer) and the rest of the item. */
export function splitId(item: Record<string, unknown>): { id: number; rest: Record<string, unknown> } {
  const { id, ...rest } = item;
  if (id === undefined) throw new AppError('validation_failed', 'Validation failed: id: is required', [{ field: 'id', message: 'is required' }]);
  const parsed = typeof id === 'number' ? parseId(id) : null;
  if (parsed === null) {
    const message = 'must be an integer from 1 to 2147483647';
    throw new AppError('validation_failed', `Validation failed: id: ${message}`, [{ field: 'id', message }]);
  }
  return { id: parsed, rest };
}

/** The single-record operations of a resource whose records a batch names by id (deals, activities). */
export interface IdBatchOps {
  /** "Deal": the 404 of an update says "Deal 5 not found", as the single-record route does. */
  createDto: Type<object>;
  updateDto: Type<object>;
  create(body: object, tx: Tx): Promise<{ id: number }>;
  patch(id: number, body: object, tx: Tx): Promise<{ id: number }>;
  remove(id: number, tx: Tx): Promise<{ id: number }>;
}

@Injectable()
export class BatchRunner {
  private readonly pipe = new AppValidationPipe();

  constructor(private readonly transactions: Transactions) {}

  /** The item checked as the single-record route checks its body (400 with the same details). */
  validate<T>(type: Type<T>, body: unknown): Promise<T> {
    return this.pipe.transform(body, { type: 'body', metatype: type, data: '' }) as Promise<T>;
  }

  /** A batch of a resource named by id only (deals, activities): create, update, upsert (PUT-like) and delete. */
  async runById(dto: BatchWriteDto, ops: IdBatchOps, outer?: Tx): Promise<BatchAnswer> {
    assertBatchSize(dto.items);
    if (dto.idProperty !== undefined && dto.idProperty !== 'id') {
      throw new AppError('validation_failed', 'idProperty: this resource names its records by id only', [{ field: 'idProperty', message: 'must be id' }]);
    }
    const plans = dto.items.map((raw): BatchPlan => {
      try {
        const item = itemObject(raw);
        if (dto.mode === 'create') return { run: async (tx) => ({ kind: 'created', id: (await ops.create(await this.validate(ops.createDto, item), tx)).id }) };
        if (dto.mode === 'upsert' && item.id === undefined) {
          return { run: async (tx) => ({ kind: 'created', id: (await ops.create(await this.validate(ops.createDto, item), tx)).id }) };
        }
        const { id, rest } = splitId(item);
        const key = { field: 'id', value: String(id).padStart(10, '0') };
        if (dto.mode === 'delete') {
          if (Object.keys(rest).length) throw unexpected(Object.keys(rest));
          return { key, run: async (tx) => ({ kind: 'deleted', id: (await ops.remove(id, tx)).id }) };
        }
        if (dto.mode === 'update')
          return { key, run: async (tx) => ({ kind: 'updated', id: (await ops.patch(id, await this.validate(ops.updateDto, rest), tx)).id }) };
        // upsert: the record when it exists (PATCH), else a new one (as PUT does, with a new id).
        return {
          key,
          run: async (tx) => {
            const patch = await this.validate(ops.updateDto, rest);
            try {
              return { kind: 'updated', id: (await this.transactions.run((t) => ops.patch(id, patch, t), tx)).id };
            } catch (e) {
              if (!(e instanceof AppError) || e.code !== 'not_found') throw e;
            }
            return { kind: 'created', id: (await ops.create(await this.validate(ops.createDto, rest), tx)).id };
          },
        };
      } catch (error) {
        return { error };
      }
    });
    return this.execute(plans, dto.atomic === true, undefined, outer);
  }

  /**
   * Runs the plans in one transaction, each in a savepoint, in the order of their keys (so two
   * batches touching the same records lock them in the same order and cannot deadlock), and answers
   * the results in input order. `before` runs first in the transaction with the items that will run
   * (refused and duplicate items left out): e.g. one SELECT resolving every item's key, or a
   * set-based write of the simple items that marks them `done`. A 5xx of any item (the database went away) fails the whole batch: nothing is
   * written. With `atomic`, any failed item rolls everything back: 422 `batch_failed` with the results.
   * With `outer`, the batch runs inside that transaction (an import commits a chunk with its checkpoint).
   */
  async execute(plans: BatchPlan[], atomic: boolean, before?: (tx: Tx, live: number[]) => Promise<void>, outer?: Tx): Promise<BatchAnswer> {
    return this.transactions.run(async (tx) => {
      const lookup = (sql: string, params: string[]) => tx.query<{ id: number }[]>(sql, params);
      const fail = async (index: number, e: unknown): Promise<BatchItemResult> => {
        const a = await errorAnswer(e, lookup);
        if (a.status >= 500) throw e;
        const error: BatchItemError = { code: a.code, message: a.message, status: a.status };
        if (a.details?.length) error.details = a.details;
        return { index, status: a.status, error };
      };
      const results: (BatchItemResult | undefined)[] = new Array<BatchItemResult | undefined>(plans.length);
      const holder = new Map<string, number>();
      for (const [index, plan] of plans.entries()) {
        if (plan.error !== undefined || !plan.run) {
          results[index] = await fail(index, plan.error);
          continue;
        }
        if (!plan.key) continue;
        const first = holder.get(`${plan.key.field}\u0000${plan.key.value}`);
        if (first === undefined) holder.set(`${plan.key.field}\u0000${plan.key.value}`, index);
        else {
          results[index] = await fail(
            index,
            new AppError('conflict', `Item ${index} names the same ${plan.key.field} as item ${first}; a batch may name a record once`, [
              { field: plan.key.field, message: `is the same as item ${first}'s`, index: first },
            ]),
          );
        }
      }
      await before?.(
        tx,
        plans.map((_, i) => i).filter((i) => results[i] === undefined),
      );
      const order = plans
        .map((plan, index) => ({ index, sort: plan.key ? `${plan.key.field}\u0000${plan.key.value}` : '' }))
        .filter(({ index }) => results[index] === undefined)
        .sort((a, b) => (a.sort < b.sort ? -1 : a.sort > b.sort ? 1 : a.index - b.index));
      const summary = { created: 0, updated: 0, deleted: 0, failed: 0 };
      for (const { index } of order) {
        const { run, done } = plans[index];
        if (done) {
          results[index] = { index, status: STATUS_OF[done.kind], id: done.id };
          summary[done.kind]++;
          continue;
        }
        if (!run) continue;
        try {
          const outcome = await this.transactions.run(run, tx);
          results[index] = { index, status: STATUS_OF[outcome.kind], id: outcome.id };
          summary[outcome.kind]++;
        } catch (e) {
          results[index] = await fail(index, e);
        }
      }
      const final = results.map((r, index) => r ?? { index, status: 500 });
      summary.failed = final.filter((r) => r.error).length;
      if (atomic && summary.failed) {
        const refused = final.map(({ id: _id, ...rest }) => rest);
        throw new AppError(
          'batch_failed',
          `${summary.failed} of ${plans.length} items failed; the batch is atomic, so nothing was written`,
          final
            .filter((r) => r.error)
            .slice(0, 50)
            .map((r) => ({ field: `items.${r.index}`, message: r.error?.message ?? '', index: r.index, status: r.status, code: r.error?.code })),
          undefined,
          { results: refused, summary: { created: 0, updated: 0, deleted: 0, failed: summary.failed } },
        );
      }
      return { results: final, summary };
    }, outer);
  }
}

function unexpected(keys: string[]): AppError {
  const details = keys.map((field) => ({ field, message: 'should not exist' }));
  return new AppError('validation_failed', `Validation failed: ${details.map((d) => `${d.field}: ${d.message}`).join('; ')}`, details);
}

export type { BatchMode };
