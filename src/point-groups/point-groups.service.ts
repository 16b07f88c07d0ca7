import { Injectable } from '@nestjs/common';
import { InjectDataSource, InjectRepository } from '@nestjs/typeorm';
import { DataSource, Repository } from 'typeorm';
import { auditOut, stampCreated, stampModified } from '../common/audit.js';
import { COLOR_MESSAGE, normalizeColor } from '../common/color.js';
import { type ErrorDetail, notFound, validationError } from '../common/errors.js';
import { type ListSpec, paginate, parseListQuery } from '../common/list.js';
import type { Principal } from '../common/request.js';
import { PointGroup } from './point-group.entity.js';
import { CreatePointGroupDto, UpdatePointGroupDto } from './point-group.dto.js';

export const POINT_GROUP_LIST_SPEC: ListSpec = {
  sortable: {
    id: 'g.id',
    name: 'g.name',
    isPublished: 'g.is_published',
    minimumPoints: 'g.minimum_points',
    maximumPoints: 'g.maximum_points',
    color: 'g.color',
    createdAt: 'g.created_at',
    modifiedAt: 'g.modified_at',
  },
  searchExpression: 'sf_text(g.name, g.description)',
  filters: { isPublished: { type: 'boolean', column: 'g.is_published' } },
};

export type PointGroupRecord = ReturnType<PointGroupsService['toRecord']>;
type Mode = 'create' | 'replace' | 'patch';

@Injectable()
export class PointGroupsService {
  constructor(
    @InjectRepository(PointGroup) private readonly groups: Repository<PointGroup>,
    @InjectDataSource() private readonly db: DataSource,
  ) {}

  toRecord(g: PointGroup) {
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

  async list(query: Record<string, unknown>) {
    const q = parseListQuery(query, POINT_GROUP_LIST_SPEC);
    const { total, items } = await paginate(this.groups.createQueryBuilder('g'), q, POINT_GROUP_LIST_SPEC);
    return { total, pointGroups: items.map((g) => this.toRecord(g)) };
  }

  private async findEntity(id: number): Promise<PointGroup> {
    const g = await this.groups.findOne({ where: { id } });
    if (!g) throw notFound('Point group', id);
    return g;
  }

  async get(id: number): Promise<PointGroupRecord> {
    return this.toRecord(await this.findEntity(id));
  }

  async create(dto: CreatePointGroupDto, who: Principal): Promise<PointGroupRecord> {
    const g = this.groups.create();
    this.assign(g, dto, 'create');
    stampCreated(g, who);
    return this.save(g);
  }

  async patch(id: number, dto: UpdatePointGroupDto, who: Principal): Promise<PointGroupRecord> {
    const g = await this.findEntity(id);
    this.assign(g, dto, 'patch');
    stampModified(g, who);
    return this.save(g);
  }

  /** PUT: full replace when the id exists (omitted optional properties reset), else a new point group. */
  async put(id: number, dto: CreatePointGroupDto, who: Principal): Promise<{ created: boolean; pointGroup: PointGroupRecord }> {
    const existing = await this.groups.findOne({ where: { id } });
    if (!existing) return { created: true, pointGroup: await this.create(dto, who) };
    this.assign(existing, dto, 'replace');
    stampModified(existing, who);
    return { created: false, pointGroup: await this.save(existing) };
  }

  async remove(id: number): Promise<PointGroupRecord> {
    return this.db.transaction(async (m) => {
      const g = await m.getRepository(PointGroup).findOne({ where: { id } });
      if (!g) throw notFound('Point group', id);
      await m.getRepository(PointGroup).delete({ id });
      return this.toRecord(g);
    });
  }

  private async save(g: PointGroup): Promise<PointGroupRecord> {
    const saved = await this.groups.save(g);
    return this.get(saved.id);
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
