import { Injectable } from '@nestjs/common';
import { aliasFrom, withGeneratedAlias } from '../common/alias.js';
import { auditOut, stampCreated, stampModified } from '../common/audit.js';
import { COLOR_MESSAGE, normalizeColor } from '../common/color.js';
import { type ErrorDetail, notFound, validationError } from '../common/errors.js';
import { parseListQuery } from '../lists/list-query.js';
import { listEnvelope } from '../lists/list-sql.js';
import type { Principal } from '../common/request.js';
import { Transactions, type Tx } from '../database/transactions.js';
import { EventsService } from '../events/events.service.js';
import { CATEGORY_LIST_SPEC, CategoriesRepository } from './categories.repository.js';

/** The list's sortable columns and filters, read by the controller's OpenAPI parameters. */
import { Category } from './category.entity.js';
import { CreateCategoryDto, UpdateCategoryDto } from './category.dto.js';

/** A category as the API returns it (the one mapper from row to record). */
export function toCategoryRecord(c: Category) {
  return { id: c.id, title: c.title, alias: c.alias, description: c.description, color: c.color, bundle: c.bundle, ...auditOut(c) };
}

export type CategoryRecord = ReturnType<typeof toCategoryRecord>;
type Mode = 'create' | 'replace' | 'patch';

@Injectable()
export class CategoriesService {
  constructor(
    private readonly categories: CategoriesRepository,
    private readonly transactions: Transactions,
    private readonly events: EventsService,
  ) {}

  async list(query: Record<string, unknown>) {
    const q = parseListQuery(query, CATEGORY_LIST_SPEC);
    const page = await this.categories.list(q);
    return listEnvelope(q, 'categories', page, page.items.map(toCategoryRecord));
  }

  async get(id: number, tx?: Tx): Promise<CategoryRecord> {
    const c = await this.categories.findRecord(id, tx);
    if (!c) throw notFound('Category', id);
    return toCategoryRecord(c);
  }

  /**
   * Creates a category. A given alias that is taken in the bundle is a 409 (by the unique index);
   * a generated one moves on to the next free suffix, so it never answers 409.
   */
  async create(dto: CreateCategoryDto, who: Principal, tx?: Tx): Promise<CategoryRecord> {
    const c = this.categories.create();
    this.assign(c, dto, 'create');
    stampCreated(c, who);
    return this.transactions.run(async (t) => {
      let id: number;
      if (dto.alias) id = await this.categories.save(c, t);
      else {
        const base = aliasFrom(c.title, '-', 'category');
        id = await withGeneratedAlias(
          base,
          await this.categories.aliasesLike(c.bundle, base, t),
          (alias) => {
            c.alias = alias;
            // A savepoint, so a taken alias does not abort the transaction.
            return this.transactions.run((s) => this.categories.save(c, s), t);
          },
          (e) => this.categories.isAliasTaken(e),
          '-',
        );
      }
      const record = await this.get(id, t);
      await this.events.record(t, 'category.created', record);
      return record;
    }, tx);
  }

  /** Changes the given properties of the row, locked while it is read and written (parallel edits all land). */
  async patch(id: number, dto: UpdateCategoryDto, who: Principal): Promise<CategoryRecord> {
    return this.transactions.run(async (tx) => {
      const c = await this.categories.findForUpdate(id, tx);
      if (!c) throw notFound('Category', id);
      const before = toCategoryRecord(c);
      this.assign(c, dto, 'patch');
      stampModified(c, who);
      const after = await this.get(await this.categories.save(c, tx), tx);
      await this.events.recordUpdate(tx, 'category.updated', before, after);
      return after;
    });
  }

  /** PUT: full replace when the id exists (omitted optional properties reset, alias kept), else a new category. */
  async put(id: number, dto: CreateCategoryDto, who: Principal): Promise<{ created: boolean; category: CategoryRecord }> {
    return this.transactions.run(async (tx) => {
      const c = await this.categories.findForUpdate(id, tx);
      if (!c) return { created: true, category: await this.create(dto, who, tx) };
      const before = toCategoryRecord(c);
      this.assign(c, dto, 'replace');
      stampModified(c, who);
      const after = await this.get(await this.categories.save(c, tx), tx);
      await this.events.recordUpdate(tx, 'category.updated', before, after);
      return { created: false, category: after };
    });
  }

  /** Deletes the category; assets that referenced it keep existing with `category: null`. One of parallel deletes succeeds. */
  async remove(id: number): Promise<CategoryRecord> {
    return this.transactions.run(async (tx) => {
      const c = await this.categories.findForUpdate(id, tx);
      if (!c || !(await this.categories.delete(id, tx))) throw notFound('Category', id);
      const record = toCategoryRecord(c);
      await this.events.record(tx, 'category.deleted', record);
      return record;
    });
  }

  private assign(c: Category, dto: UpdateCategoryDto, mode: Mode) {
    const errors: ErrorDetail[] = [];
    for (const k of ['title', 'bundle'] as const) {
      if (dto[k] === null) errors.push({ field: k, message: 'must not be null' });
    }
    if (dto.title !== undefined && dto.title !== null) {
      c.title = dto.title.trim();
      if (!c.title) errors.push({ field: 'title', message: 'must not be empty' });
    }
    if (dto.bundle !== undefined && dto.bundle !== null) c.bundle = dto.bundle;
    if (dto.alias) c.alias = dto.alias;
    if (dto.description !== undefined || mode !== 'patch') c.description = dto.description ?? null;
    if (dto.color !== undefined || mode !== 'patch') {
      if (dto.color === undefined || dto.color === null) c.color = null;
      else {
        const color = normalizeColor(dto.color);
        if (color === null) errors.push({ field: 'color', message: COLOR_MESSAGE });
        c.color = color;
      }
    }
    if (errors.length) throw validationError(`Validation failed: ${errors.map((e) => `${e.field}: ${e.message}`).join('; ')}`, errors);
  }
}
