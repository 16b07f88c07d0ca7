import { Injectable } from '@nestjs/common';
import { auditOut, stampCreated, stampModified } from '../common/audit.js';
import { iso, parseIsoWithOffset } from '../common/dates.js';
import { AppError, fieldError, notFound } from '../common/errors.js';
import { parseListQuery } from '../lists/list-query.js';
import { listEnvelope } from '../lists/list-sql.js';
import { assertBatchSize } from '../batch/batch.js';
import type { Principal } from '../common/request.js';
import { ContactsService } from '../contacts/contacts.service.js';
import { Transactions, type Tx } from '../database/transactions.js';
import { EventsService } from '../events/events.service.js';
import { Campaign } from './campaign.entity.js';
import {
  type CampaignMembersBatchDto,
  type CampaignMembersBatchResultDto,
  CreateCampaignDto,
  MEMBERSHIP_BATCH_MAX,
  ReplaceCampaignDto,
  UpdateCampaignDto,
} from './campaign.dto.js';
import { CampaignMembersRepository } from './campaign-members.repository.js';
import { CAMPAIGN_LIST_SPEC, CampaignsRepository } from './campaigns.repository.js';

/** The list's sortable columns and filters, read by the controller's OpenAPI parameters. */
import { checkCreateStatus, checkDateOrder, DEFAULT_CAMPAIGN_STATUS, rejectNulls } from './campaign.rules.js';

/** A campaign as the API returns it (the one mapper from row to record). */
export function toCampaignRecord(c: Campaign) {
  return {
    id: c.id,
    name: c.name,
    description: c.description,
    type: c.type,
    status: c.status,
    startDate: iso(c.startDate),
    endDate: iso(c.endDate),
    segmentId: c.segmentId ?? null,
    ...auditOut(c),
  };
}

export type CampaignRecord = ReturnType<typeof toCampaignRecord>;

@Injectable()
export class CampaignsService {
  constructor(
    private readonly campaigns: CampaignsRepository,
    private readonly members: CampaignMembersRepository,
    private readonly transactions: Transactions,
    private readonly events: EventsService,
    private readonly contacts: ContactsService,
  ) {}

  async list(query: Record<string, unknown>) {
    const q = parseListQuery(query, CAMPAIGN_LIST_SPEC);
    const page = await this.campaigns.list(q);
    return listEnvelope(q, 'campaigns', page, page.items.map(toCampaignRecord));
  }

  async get(id: number, tx?: Tx): Promise<CampaignRecord> {
    const c = await this.campaigns.findRecord(id, tx);
    if (!c) throw notFound('Campaign', id);
    return toCampaignRecord(c);
  }

  async create(dto: CreateCampaignDto | ReplaceCampaignDto, who: Principal, tx?: Tx): Promise<CampaignRecord> {
    const c = this.campaigns.create();
    this.assign(c, dto, true);
    c.status = checkCreateStatus(dto.status);
    checkDateOrder(c.startDate, c.endDate);
    stampCreated(c, who);
    return this.transactions.run(async (t) => {
      if (c.segmentId !== null) await this.members.lockSegment(c.segmentId, t);
      const id = await this.campaigns.save(c, t);
      const record = await this.get(id, t);
      await this.events.record(t, 'campaign.created', record);
      if (c.segmentId !== null) await this.members.mirror(c.segmentId, { campaignId: id }, t);
      return record;
    }, tx);
  }

  /** Changes the given properties of the row, locked while it is read and written (parallel edits all land). */
  async patch(id: number, dto: UpdateCampaignDto, who: Principal): Promise<CampaignRecord> {
    rejectNulls(dto, ['name']);
    return this.transactions.run(async (tx) => {
      // A segment to mirror is locked before the campaign's row, the order a segment's deletion takes them in.
      if (typeof dto.segmentId === 'number') await this.members.lockSegment(dto.segmentId, tx);
      const c = await this.campaigns.findForUpdate(id, tx);
      if (!c) throw notFound('Campaign', id);
      const before = toCampaignRecord(c);
      this.assign(c, dto, false);
      // A PATCH of one date is checked against the other, stored one.
      checkDateOrder(c.startDate, c.endDate);
      return this.write(c, before, who, tx);
    });
  }

  /** PUT: full replace when the id exists (omitted optional properties reset), else a new campaign. */
  async put(id: number, dto: ReplaceCampaignDto, who: Principal): Promise<{ created: boolean; campaign: CampaignRecord }> {
    return this.transactions.run(async (tx) => {
      if (typeof dto.segmentId === 'number') await this.members.lockSegment(dto.segmentId, tx);
      const c = await this.campaigns.findForUpdate(id, tx);
      if (!c) return { created: true, campaign: await this.create(dto, who, tx) };
      const before = toCampaignRecord(c);
      this.assign(c, dto, true);
      checkDateOrder(c.startDate, c.endDate);
      return { created: false, campaign: await this.write(c, before, who, tx) };
    });
  }

  /**
   * Saves an edited (locked) campaign with its campaign.updated event. A segmentId newly set makes
   * the members the segment's, in the same transaction (under the segment's membership lock, so no
   * concurrent change of the segment's members is missed); a cleared one leaves the members as they are.
   */
  private async write(c: Campaign, before: CampaignRecord, who: Principal, tx: Tx): Promise<CampaignRecord> {
    const mirrorFrom = c.segmentId !== null && c.segmentId !== before.segmentId ? c.segmentId : null;
    if (mirrorFrom !== null) await this.members.lockSegment(mirrorFrom, tx);
    stampModified(c, who);
    const after = await this.get(await this.campaigns.save(c, tx), tx);
    await this.events.recordUpdate(tx, 'campaign.updated', before, after);
    if (mirrorFrom !== null) await this.members.mirror(mirrorFrom, { campaignId: c.id }, tx);
    return after;
  }

  /**
   * A segment's membership changed (the caller holds its membership lock): the campaigns that
   * mirror it follow, for `contactIds` only (null: every member). Answers how many memberships changed.
   */
  async mirrorSegment(segmentId: number, contactIds: number[] | null, tx: Tx): Promise<number> {
    const r = await this.members.mirror(segmentId, { contactIds }, tx);
    return r.added + r.removed;
  }

  /** Which of these segments some campaign mirrors. */
  mirroredSegments(segmentIds: number[], tx?: Tx): Promise<Set<number>> {
    return this.members.mirroredSegments(segmentIds, tx);
  }

  /**
   * A segment is being deleted: the campaigns that mirror it stop (segmentId null, each with its
   * campaign.updated event); their members stay, managed by hand again.
   */
  async detachSegment(segmentId: number, who: Principal, tx: Tx): Promise<number> {
    const ids = await this.campaigns.idsBySegment(segmentId, tx);
    for (const id of ids) {
      const c = await this.campaigns.findForUpdate(id, tx);
      if (!c || c.segmentId !== segmentId) continue;
      const before = toCampaignRecord(c);
      c.segmentId = null;
      await this.write(c, before, who, tx);
    }
    return ids.length;
  }

  /** Deletes the campaign; its memberships go with it (FK ON DELETE CASCADE), the contacts stay. One of parallel deletes succeeds. */
  async remove(id: number): Promise<CampaignRecord> {
    return this.transactions.run(async (tx) => {
      const c = await this.campaigns.findForUpdate(id, tx);
      if (!c || !(await this.campaigns.delete(id, tx))) throw notFound('Campaign', id);
      const record = toCampaignRecord(c);
      await this.events.record(tx, 'campaign.deleted', record);
      return record;
    });
  }

  /** Adds a contact; adding a member again is not an error. A missing campaign or contact is a 404 (by the foreign keys). */
  async addContact(campaignId: number, contactId: number): Promise<{ success: true }> {
    await this.members.add(campaignId, contactId);
    return { success: true };
  }

  /** Removes a contact; a missing campaign or contact, or a contact that is not a member, is a 404. */
  async removeContact(campaignId: number, contactId: number): Promise<{ success: true }> {
    const removed = await this.transactions.run(async (tx) => {
      await this.members.assertNotMirrored(campaignId, tx);
      return this.members.remove(campaignId, contactId, tx);
    });
    if (removed) return { success: true };
    // Nothing was removed: say why.
    if (!(await this.campaigns.exists(campaignId))) throw notFound('Campaign', campaignId);
    await this.contacts.get(contactId); // 404 when the contact does not exist
    throw new AppError('not_found', `Contact ${contactId} is not a member of campaign ${campaignId}`);
  }

  /**
   * `POST /api/campaigns/{id}/contacts/batch`: adds and removes up to 10,000 contacts each in one
   * set-based statement (campaign.contact_added / _removed per membership changed). 404 when the
   * campaign does not exist; an id in both lists is a 400; unknown contact ids are listed in `notFound`.
   */
  async batchContacts(campaignId: number, dto: CampaignMembersBatchDto): Promise<CampaignMembersBatchResultDto> {
    const add = dto.add ?? [];
    const remove = dto.remove ?? [];
    assertBatchSize(add, MEMBERSHIP_BATCH_MAX, 'add');
    assertBatchSize(remove, MEMBERSHIP_BATCH_MAX, 'remove');
    const removing = new Set(remove);
    const both = [...new Set(add.filter((id) => removing.has(id)))];
    if (both.length) {
      throw new AppError('validation_failed', `Contact ${both.slice(0, 10).join(', ')} is both in add and in remove`, [
        { field: 'remove', message: `must not name a contact that add names (${both.slice(0, 10).join(', ')})` },
      ]);
    }
    const r = await this.transactions.run(async (tx) => {
      await this.members.assertNotMirrored(campaignId, tx);
      const done = await this.members.batch(campaignId, add, remove, tx);
      // Nothing changed when the campaign is missing; the 404 rolls back the (empty) transaction.
      if (!done.campaign) throw notFound('Campaign', campaignId);
      return done;
    });
    return { added: r.added, alreadyMember: r.addFound - r.added, removed: r.removed, notMember: r.removeFound - r.removed, notFound: r.notFound };
  }

  /**
   * Adds contacts to a campaign inside the caller's transaction (an import's chunk): one set-based
   * statement with a campaign.contact_added event per new membership. 404 when the campaign is gone.
   */
  async addContacts(campaignId: number, contactIds: number[], tx: Tx): Promise<number> {
    if (!contactIds.length) return 0;
    const done = await this.members.batch(campaignId, contactIds, [], tx);
    if (!done.campaign) throw notFound('Campaign', campaignId);
    return done.added;
  }

  /**
   * Removes contacts from a campaign inside the caller's transaction (a workflow step): one
   * set-based statement with a campaign.contact_removed event per membership removed. 404 when the
   * campaign is gone, 409 when it mirrors a segment.
   */
  async removeContacts(campaignId: number, contactIds: number[], tx: Tx): Promise<number> {
    if (!contactIds.length) return 0;
    await this.members.assertNotMirrored(campaignId, tx);
    const done = await this.members.batch(campaignId, [], contactIds, tx);
    if (!done.campaign) throw notFound('Campaign', campaignId);
    return done.removed;
  }

  /** Whether the campaign exists (a workflow step names one). */
  exists(id: number, tx?: Tx): Promise<boolean> {
    return this.campaigns.exists(id, tx);
  }

  /** The campaign's member contacts, with exactly the contacts list's parameters and envelope. */
  async listContacts(campaignId: number, query: Record<string, unknown>) {
    if (!(await this.campaigns.exists(campaignId))) throw notFound('Campaign', campaignId);
    return this.contacts.list(query, {
      name: `campaign ${campaignId} contacts`,
      where: this.members.memberScope(campaignId),
      count: () => this.members.count(campaignId),
      changedExpression: this.members.memberChangedExpression(campaignId),
    });
  }

  /** The periodic job: one idempotent UPDATE and a campaign.updated event per completed campaign, in one transaction; answers how many it completed. */
  async completeExpired(): Promise<number> {
    return this.transactions.run(async (tx) => {
      const changed = await this.campaigns.completeExpired(tx);
      for (const { id, previousStatus } of changed) {
        const after = await this.get(id, tx);
        await this.events.record(tx, 'campaign.updated', after, { status: previousStatus });
      }
      return changed.length;
    });
  }

  /** Copies DTO values onto the entity; with `replace`, omitted optional properties are reset to defaults. */
  private assign(c: Campaign, dto: UpdateCampaignDto, replace: boolean) {
    const given = (k: keyof UpdateCampaignDto) => dto[k] !== undefined || replace;
    if (dto.name !== undefined && dto.name !== null) {
      c.name = dto.name.trim();
      if (c.name === '') throw fieldError('name', 'must not be empty');
    }
    if (given('description')) c.description = dto.description ?? null;
    if (given('type')) c.type = dto.type ?? null;
    if (given('status')) c.status = dto.status ?? DEFAULT_CAMPAIGN_STATUS;
    if (given('startDate')) c.startDate = dto.startDate ? parseIsoWithOffset(dto.startDate) : null;
    if (given('endDate')) c.endDate = dto.endDate ? parseIsoWithOffset(dto.endDate) : null;
    if (given('segmentId')) c.segmentId = dto.segmentId ?? null;
  }
}
