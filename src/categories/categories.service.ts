import { Injectable } from '@nestjs/common';
import { InjectDataSource, InjectRepository } from '@nestjs/typeorm';
import { DataSource, EntityManager, QueryFailedError, Repository } from 'typeorm';
import { aliasFrom, firstFreeAlias } from '../common/alias.js';
import { auditOut, stampCreated, stampModified } from '../common/audit.js';
import { COLOR_MESSAGE, normalizeColor } from '../common/color.js';
import { conflict, type ErrorDetail, notFound, validationError } from '../common/errors.js';
import { type ListSpec, paginate, parseListQuery } from '../common/list.js';
import type { Principal } from '../common/request.js';
import { Category } from './category.entity.js';
import { CATEGORY_BUNDLES, CreateCategoryDto, UpdateCategoryDto } from './category.dto.js';

export const CATEGORY_LIST_SPEC: ListSpec = {
  sortable: {
    id: 'c.id',
    title: 'c.title',
    alias: 'c.alias',
    bundle: 'c.bundle',
    color: 'c.color',
    createdAt: 'c.created_at',
    modifiedAt: 'c.modified_at',
  },
  searchExpression: 'sf_text(c.title, c.alias, c.description)',
  filters: { bundle: { type: 'string', column: 'c.bundle', values: CATEGORY_BUNDLES } },
};

export type CategoryRecord = ReturnType<CategoriesService['toRecord']>;
type Mode = 'create' | 'replace' | 'patch';

@Injectable()
export class CategoriesService {
  constructor(
    @InjectRepository(Category) private readonly categories: Repository<Category>,
    @InjectDataSource() private readonly db: DataSource,
  ) {}

  toRecord(c: Category) {
    return { id: c.id, title: c.title, alias: c.alias, description: c.description, color: c.color, bundle: c.bundle, ...auditOut(c) };
  }

  async list(query: Record<string, unknown>) {
    const q = parseListQuery(query, CATEGORY_LIST_SPEC);
    const { total, items } = await paginate(this.categories.createQueryBuilder('c'), q, CATEGORY_LIST_SPEC);
    return { total, categories: items.map((c) => this.toRecord(c)) };
  }

  async findEntity(id: number, manager?: EntityManager): Promise<Category> {
    const c = await (manager ? manager.getRepository(Category) : this.categories).findOne({ where: { id } });
    if (!c) throw notFound('Category', id);
    return c;
  }

  async get(id: number): Promise<CategoryRecord> {
    return this.toRecord(await this.findEntity(id));
  }

  async create(dto: CreateCategoryDto, who: Principal): Promise<CategoryRecord> {
    const c = this.categories.create();
    this.assign(c, dto, 'create');
    stampCreated(c, who);
    return this.persist(c, !dto.alias);
  }

  async patch(id: number, dto: UpdateCategoryDto, who: Principal): Promise<CategoryRecord> {
    const c = await this.findEntity(id);
    this.assign(c, dto, 'patch');
    stampModified(c, who);
    return this.persist(c, false);
  }

  /** PUT: full replace when the id exists (omitted optional properties reset, alias kept), else a new category. */
  async put(id: number, dto: CreateCategoryDto, who: Principal): Promise<{ created: boolean; category: CategoryRecord }> {
    const existing = await this.categories.findOne({ where: { id } });
    if (!existing) return { created: true, category: await this.create(dto, who) };
    this.assign(existing, dto, 'replace');
    stampModified(existing, who);
    return { created: false, category: await this.persist(existing, false) };
  }

  /** Deletes the category; assets that referenced it keep existing with `category: null`. */
  async remove(id: number): Promise<CategoryRecord> {
    return this.db.transaction(async (m) => {
      const record = this.toRecord(await this.findEntity(id, m));
      await m.getRepository(Category).delete({ id });
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

  /** Saves; a generated alias is made unique within the bundle (retried on a concurrent insert), a given one that is taken is a 409. */
  private async persist(c: Category, generate: boolean): Promise<CategoryRecord> {
    const base = aliasFrom(c.title, '-', 'category');
    for (let attempt = 0; ; attempt++) {
      try {
        const saved = await this.db.transaction(async (m) => {
          if (generate) {
            const rows: { alias: string }[] = await m.query(`SELECT alias FROM categories WHERE bundle = $1 AND (alias = $2 OR alias LIKE $3)`, [
              c.bundle,
              base,
              `${base.replace(/[_%\\]/g, '\\$&')}-%`,
            ]);
            c.alias = firstFreeAlias(base, new Set(rows.map((r) => r.alias)), '-');
          }
          return m.getRepository(Category).save(c);
        });
        return this.get(saved.id);
      } catch (e) {
        const pg = (e as QueryFailedError & { driverError?: { code?: string; constraint?: string } }).driverError;
        if (e instanceof QueryFailedError && pg?.code === '23505' && pg.constraint === 'categories_bundle_alias_uq') {
          if (generate && attempt < 5) continue;
          const rows: { id: number }[] = await this.db.query(`SELECT id FROM categories WHERE bundle = $1 AND alias = $2`, [c.bundle, c.alias]);
          throw conflict(`The alias "${c.alias}" is already taken in the ${c.bundle} bundle`, [
            { field: 'alias', message: 'is already taken', existingId: rows[0]?.id ?? null },
          ]);
        }
        throw e;
      }
    }
  }
}
