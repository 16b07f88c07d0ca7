import { Injectable } from '@nestjs/common';
import { InjectDataSource, InjectRepository } from '@nestjs/typeorm';
import { DataSource, QueryFailedError, Repository } from 'typeorm';
import { auditOut, stampCreated, stampModified } from '../common/audit.js';
import { iso, parseIsoWithOffset } from '../common/dates.js';
import { AppError, fieldError, notFound } from '../common/errors.js';
import { type ListSpec, paginate, parseListQuery } from '../common/list.js';
import type { Principal } from '../common/request.js';
import { ContactsService } from '../contacts/contacts.service.js';
import { Campaign } from './campaign.entity.js';
import { CreateCampaignDto, ReplaceCampaignDto, UpdateCampaignDto } from './campaign.dto.js';
import { CAMPAIGN_STATUSES, checkCreateStatus, checkDateOrder, COMPLETE_EXPIRED_SQL, DEFAULT_CAMPAIGN_STATUS, rejectNulls } from './campaign.rules.js';

export const CAMPAIGN_LIST_SPEC: ListSpec = {
  sortable: {
    id: 'cp.id',
    name: 'cp.name',
    description: 'cp.description',
    type: 'cp.type',
    status: 'cp.status',
    startDate: 'cp.start_date',
    endDate: 'cp.end_date',
    createdAt: 'cp.created_at',
    modifiedAt: 'cp.modified_at',
  },
  // Same expression as the campaigns_search_trgm index.
  searchExpression: 'sf_text(cp.name, cp.description, cp.type)',
  filters: { status: { type: 'string', column: 'cp.status', values: CAMPAIGN_STATUSES } },
};

export type CampaignRecord = ReturnType<CampaignsService['toRecord']>;

@Injectable()
export class CampaignsService {
  constructor(
    @InjectRepository(Campaign) private readonly campaigns: Repository<Campaign>,
    @InjectDataSource() private readonly db: DataSource,
    private readonly contacts: ContactsService,
  ) {}

  toRecord(c: Campaign) {
    return {
      id: c.id,
      name: c.name,
      description: c.description,
      type: c.type,
      status: c.status,
      startDate: iso(c.startDate),
      endDate: iso(c.endDate),
      ...auditOut(c),
    };
  }

  async list(query: Record<string, unknown>) {
    const q = parseListQuery(query, CAMPAIGN_LIST_SPEC);
    const { total, items } = await paginate(this.campaigns.createQueryBuilder('cp'), q, CAMPAIGN_LIST_SPEC);
    return { total, campaigns: items.map((c) => this.toRecord(c)) };
  }

  private async findEntity(id: number): Promise<Campaign> {
    const c = await this.campaigns.findOne({ where: { id } });
    if (!c) throw notFound('Campaign', id);
    return c;
  }

  async get(id: number): Promise<CampaignRecord> {
    return this.toRecord(await this.findEntity(id));
  }

  async create(dto: CreateCampaignDto | ReplaceCampaignDto, who: Principal): Promise<CampaignRecord> {
    const c = this.campaigns.create();
    this.assign(c, dto, true);
    c.status = checkCreateStatus(dto.status);
    checkDateOrder(c.startDate, c.endDate);
    stampCreated(c, who);
    return this.toRecord(await this.campaigns.save(c));
  }

  async patch(id: number, dto: UpdateCampaignDto, who: Principal): Promise<CampaignRecord> {
    rejectNulls(dto, ['name']);
    const c = await this.findEntity(id);
    this.assign(c, dto, false);
    // A PATCH of one date is checked against the other, stored one.
    checkDateOrder(c.startDate, c.endDate);
    stampModified(c, who);
    return this.toRecord(await this.campaigns.save(c));
  }

  /** PUT: full replace when the id exists (omitted optional properties reset), else a new campaign. */
  async put(id: number, dto: ReplaceCampaignDto, who: Principal): Promise<{ created: boolean; campaign: CampaignRecord }> {
    const existing = await this.campaigns.findOne({ where: { id } });
    if (!existing) return { created: true, campaign: await this.create(dto, who) };
    this.assign(existing, dto, true);
    checkDateOrder(existing.startDate, existing.endDate);
    stampModified(existing, who);
    return { created: false, campaign: this.toRecord(await this.campaigns.save(existing)) };
  }

  /** Deletes the campaign; its memberships go with it (FK ON DELETE CASCADE), the contacts stay. */
  async remove(id: number): Promise<CampaignRecord> {
    const c = await this.findEntity(id);
    const record = this.toRecord(c);
    await this.campaigns.delete({ id });
    return record;
  }

  /** Adds a contact; adding a member again is not an error (ON CONFLICT DO NOTHING, safe under races). */
  async addContact(campaignId: number, contactId: number): Promise<{ success: true }> {
    // One statement: the foreign keys say whether the campaign and the contact exist.
    try {
      await this.db.query(
        `INSERT INTO campaign_members (campaign_id, contact_id) VALUES ($1, $2) ON CONFLICT (campaign_id, contact_id) DO NOTHING`,
        [campaignId, contactId],
      );
    } catch (e) {
      const pg = (e as QueryFailedError & { driverError?: { code?: string; constraint?: string } }).driverError;
      if (e instanceof QueryFailedError && pg?.code === '23503') {
        throw pg.constraint?.includes('contact') ? notFound('Contact', contactId) : notFound('Campaign', campaignId);
      }
      throw e;
    }
    return { success: true };
  }

  /** Removes a contact; a contact that is not a member is a 404. */
  async removeContact(campaignId: number, contactId: number): Promise<{ success: true }> {
    await this.ensureBoth(campaignId, contactId);
    // For DELETE, TypeORM's raw result is [rows, rowCount].
    const [, deleted]: [unknown[], number] = await this.db.query(`DELETE FROM campaign_members WHERE campaign_id = $1 AND contact_id = $2`, [
      campaignId,
      contactId,
    ]);
    if (!deleted) throw new AppError('not_found', `Contact ${contactId} is not a member of campaign ${campaignId}`);
    return { success: true };
  }

  /** The campaign's member contacts, with exactly the contacts list's parameters and envelope. */
  async listContacts(campaignId: number, query: Record<string, unknown>) {
    const exists: unknown[] = await this.db.query(`SELECT 1 FROM campaigns WHERE id = $1`, [campaignId]);
    if (!exists.length) throw notFound('Campaign', campaignId);
    return this.contacts.list(
      query,
      (qb) => qb.andWhere('EXISTS (SELECT 1 FROM campaign_members m WHERE m.contact_id = c.id AND m.campaign_id = :campaignId)', { campaignId }),
      // Every member row names an existing contact (foreign key), so the members are the total.
      async () => Number((await this.db.query(`SELECT count(*)::bigint AS n FROM campaign_members WHERE campaign_id = $1`, [campaignId]))[0].n),
    );
  }

  /** The periodic job: one idempotent UPDATE; answers how many campaigns it completed. */
  async completeExpired(): Promise<number> {
    // For UPDATE, TypeORM's raw result is [rows, rowCount].
    const [, updated]: [unknown[], number] = await this.db.query(COMPLETE_EXPIRED_SQL);
    return updated;
  }

  private async ensureBoth(campaignId: number, contactId: number): Promise<void> {
    const rows: { campaign: boolean; contact: boolean }[] = await this.db.query(
      `SELECT EXISTS (SELECT 1 FROM campaigns WHERE id = $1) AS campaign, EXISTS (SELECT 1 FROM contacts WHERE id = $2) AS contact`,
      [campaignId, contactId],
    );
    if (!rows[0].campaign) throw notFound('Campaign', campaignId);
    if (!rows[0].contact) throw notFound('Contact', contactId);
  }

  /** Copies DTO values onto the entity; with `replace`, omitted optional properties are reset to defaults. */
  private assign(c: Campaign, dto: UpdateCampaignDto, replace: boolean) {
    const given = <K extends keyof UpdateCampaignDto>(k: K) => dto[k] !== undefined || replace;
    if (dto.name !== undefined && dto.name !== null) {
      c.name = dto.name.trim();
      if (c.name === '') throw fieldError('name', 'must not be empty');
    }
    if (given('description')) c.description = dto.description ?? null;
    if (given('type')) c.type = dto.type ?? null;
    if (given('status')) c.status = dto.status ?? DEFAULT_CAMPAIGN_STATUS;
    if (given('startDate')) c.startDate = dto.startDate ? parseIsoWithOffset(dto.startDate) : null;
    if (given('endDate')) c.endDate = dto.endDate ? parseIsoWithOffset(dto.endDate) : null;
  }
}
