import { Injectable } from '@nestjs/common';
import { auditOut, stampCreated, stampModified } from '../common/audit.js';
import { COLOR_MESSAGE, normalizeColor } from '../common/color.js';
import { type ErrorDetail, notFound, validationError } from '../common/errors.js';
import { parseListQuery } from '../lists/list-query.js';
import { listEnvelope } from '../lists/list-sql.js';
import type { Principal } from '../common/request.js';
import { Transactions, type Tx } from '../database/transactions.js';
import { EventsService } from '../events/events.service.js';
import { PointGroup } from './point-group.entity.js';
import { CreatePointGroupDto, UpdatePointGroupDto } from './point-group.dto.js';
import { POINT_GROUP_LIST_SPEC, PointGroupsRepository } from './point-groups.repository.js';

/** The list's sortable columns and filters, read by the controller's OpenAPI parameters. */

/** A point group as the API returns it (the one mapper from row to record). */
export function toPointGroupRecord(g: PointGroup) {
  return {
    id: g.id,
    name: g.name,
    description: g.description,
    isPublished: g.isPublished,
    minimumPoints: g.minimumPoints,
    maximumPoints: g.maximumPoints,
    color: g.color,
    ...auditOut(g),
  };
}

export type PointGroupRecord = ReturnType<typeof toPointGroupRecord>;
type Mode = 'create' | 'replace' | 'patch';

@Injectable()
export class PointGroupsService {
  constructor(
    private readonly groups: PointGroupsRepository,
    private readonly transactions: Transactions,
    private readonly events: EventsService,
  ) {}

  async list(query: Record<string, unknown>) {
    const q = parseListQuery(query, POINT_GROUP_LIST_SPEC);
    const page = await this.groups.list(q);
    return listEnvelope(q, 'pointGroups', page, page.items.map(toPointGroupRecord));
  }

  async get(id: number, tx?: Tx): Promise<PointGroupRecord> {
    const g = await this.groups.findRecord(id, tx);
    if (!g) throw notFound('Point group', id);
    return toPointGroupRecord(g);
  }

  async create(dto: CreatePointGroupDto, who: Principal, tx?: Tx): Promise<PointGroupRecord> {
    const g = this.groups.create();
    this.assign(g, dto, 'create');
    stampCreated(g, who);
    return this.transactions.run(async (t) => {
      const record = await this.get(await this.groups.save(g, t), t);
      await this.events.record(t, 'point_group.created', record);
      return record;
    }, tx);
  }

  /** Changes the given properties of the row, locked while it is read and written (the range is checked against what is stored). */
  async patch(id: number, dto: UpdatePointGroupDto, who: Principal): Promise<PointGroupRecord> {
    return this.transactions.run(async (tx) => {
      const g = await this.groups.findForUpdate(id, tx);
      if (!g) throw notFound('Point group', id);
      const before = toPointGroupRecord(g);
      this.assign(g, dto, 'patch');
      stampModified(g, who);
      const after = await this.get(await this.groups.save(g, tx), tx);
      await this.events.recordUpdate(tx, 'point_group.updated', before, after);
      return after;
    });
  }

  /** PUT: full replace when the id exists (omitted optional properties reset), else a new point group. */
  async put(id: number, dto: CreatePointGroupDto, who: Principal): Promise<{ created: boolean; pointGroup: PointGroupRecord }> {
    return this.transactions.run(async (tx) => {
      const g = await this.groups.findForUpdate(id, tx);
      if (!g) return { created: true, pointGroup: await this.create(dto, who, tx) };
      const before = toPointGroupRecord(g);
      this.assign(g, dto, 'replace');
      stampModified(g, who);
      const after = await this.get(await this.groups.save(g, tx), tx);
      await this.events.recordUpdate(tx, 'point_group.updated', before, after);
      return { created: false, pointGroup: after };
    });
  }

  /** Deletes the point group; one of parallel deletes succeeds, the others are 404s. */
  async remove(id: number): Promise<PointGroupRecord> {
    return this.transactions.run(async (tx) => {
      const g = await this.groups.findForUpdate(id, tx);
      if (!g || !(await this.groups.delete(id, tx))) throw notFound('Point group', id);
      const record = toPointGroupRecord(g);
      await this.events.record(tx, 'point_group.deleted', record);
      return record;
    });
  }

  /** Copies the body and checks the resulting range (the stored values count for omitted PATCH properties). */
  private assign(g: PointGroup, dto: UpdatePointGroupDto, mode: Mode) {
    const errors: ErrorDetail[] = [];
    for (const k of ['name', 'isPublished', 'minimumPoints', 'maximumPoints'] as const) {
      if (dto[k] === null) errors.push({ field: k, message: 'must not be null' });
    }
    if (dto.name !== undefined && dto.name !== null) {
      g.name = dto.name.trim();
      if (!g.name) errors.push({ field: 'name', message: 'must not be empty' });
    }
    if (dto.description !== undefined || mode !== 'patch') g.description = dto.description ?? null;
    if (dto.isPublished !== undefined && dto.isPublished !== null) g.isPublished = dto.isPublished;
    else if (mode !== 'patch') g.isPublished = true;
    if (dto.minimumPoints !== undefined && dto.minimumPoints !== null) g.minimumPoints = dto.minimumPoints;
    if (dto.maximumPoints !== undefined && dto.maximumPoints !== null) g.maximumPoints = dto.maximumPoints;
    if (dto.color !== undefined || mode !== 'patch') {
      if (dto.color === undefined || dto.color === null) g.color = null;
      else {
        const color = normalizeColor(dto.color);
        if (color === null) errors.push({ field: 'color', message: COLOR_MESSAGE });
        g.color = color;
      }
    }
    if (!errors.length && g.minimumPoints > g.maximumPoints) {
      errors.push({
        field: dto.maximumPoints !== undefined ? 'maximumPoints' : 'minimumPoints',
        message: `must keep minimumPoints (${g.minimumPoints}) <= maximumPoints (${g.maximumPoints})`,
      });
    }
    if (errors.length) throw validationError(`Validation failed: ${errors.map((e) => `${e.field}: ${e.message}`).join('; ')}`, errors);
  }
}
