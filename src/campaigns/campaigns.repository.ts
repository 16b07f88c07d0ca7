import { Injectable } from '@nestjs/common';
import { Transactions, type Tx } from '../database/transactions.js';
import { auditFields, defineList, type ListQuery } from '../lists/list-spec.js';
import { type ListPage, paginate, rowsAndCount } from '../lists/list-sql.js';
import { Campaign } from './campaign.entity.js';
import { CAMPAIGN_STATUSES } from './campaign.rules.js';

export const CAMPAIGN_LIST_SPEC = defineList({
  name: 'campaigns',
  sortable: ['id', 'name', 'description', 'type', 'status', 'startDate', 'endDate', 'createdAt', 'modifiedAt'],
  // Same expression as the campaigns_search_trgm index.
  searchExpression: 'sf_text(cp.name, cp.description, cp.type)',
  filters: { status: { type: 'string', column: 'cp.status', values: CAMPAIGN_STATUSES } },
  fields: {
    id: { type: 'id', sql: 'cp.id' },
    name: { type: 'string', sql: 'cp.name' },
    description: { type: 'string', sql: 'cp.description' },
    type: { type: 'string', sql: 'cp.type' },
    status: { type: 'enum', sql: 'cp.status', values: CAMPAIGN_STATUSES },
    startDate: { type: 'datetime', sql: 'cp.start_date' },
    endDate: { type: 'datetime', sql: 'cp.end_date' },
    segmentId: { type: 'id', sql: 'cp.segment_id', description: 'the segment the campaign mirrors' },
    ...auditFields('cp'),
  },
});

/**
 * The completion job: one idempotent statement. Campaigns whose endDate has passed and that are
 * not completed yet become completed; running it twice changes nothing the second time.
 * The change is recorded as made by the service (modifiedBy null, modifiedByUser "system").
 */
const COMPLETE_EXPIRED_SQL = `
  UPDATE campaigns c
     SET status = 'completed', modified_at = now(), modified_by = NULL, modified_by_user = 'system'
    FROM (SELECT id, status FROM campaigns
           WHERE status <> 'completed' AND end_date IS NOT NULL AND end_date <= now() FOR UPDATE) old
   WHERE c.id = old.id
  RETURNING c.id, old.status AS "previousStatus"`;

/** Every query of the campaigns table. */
@Injectable()
export class CampaignsRepository {
  constructor(private readonly transactions: Transactions) {}

  private repo(tx?: Tx) {
    return this.transactions.manager(tx).getRepository(Campaign);
  }

  /** A new, unsaved campaign. */
  create(): Campaign {
    return this.repo().create();
  }

  list(q: ListQuery): Promise<ListPage<Campaign>> {
    return paginate(this.repo().createQueryBuilder('cp'), q, CAMPAIGN_LIST_SPEC);
  }

  findRecord(id: number, tx?: Tx): Promise<Campaign | null> {
    return this.repo(tx).findOne({ where: { id } });
  }

  /** The row, locked until `tx` ends (a read-modify-write or a delete holds it); null when absent. */
  findForUpdate(id: number, tx: Tx): Promise<Campaign | null> {
    return this.repo(tx).findOne({ where: { id }, lock: { mode: 'pessimistic_write' } });
  }

  /** Whether the campaign exists. Raw SQL: it runs on every request of the bench row "list a campaign's contacts". */
  async exists(id: number, tx?: Tx): Promise<boolean> {
    const rows: unknown[] = await this.transactions.handle(tx).query(`SELECT 1 FROM campaigns WHERE id = $1`, [id]);
    return rows.length > 0;
  }

  /** The campaigns that mirror a segment. */
  async idsBySegment(segmentId: number, tx?: Tx): Promise<number[]> {
    const rows: { id: number }[] = await this.transactions.handle(tx).query(`SELECT id FROM campaigns WHERE segment_id = $1 ORDER BY id`, [segmentId]);
    return rows.map((r) => r.id);
  }

  /** Names of campaigns by id, for another feature's records (e.g. a text message's campaign). */
  async namesByIds(ids: readonly number[], tx?: Tx): Promise<Map<number, string>> {
    if (!ids.length) return new Map();
    const rows: { id: number; name: string }[] = await this.transactions
      .handle(tx)
      .query(`SELECT id, name FROM campaigns WHERE id = ANY($1)`, [[...new Set(ids)]]);
    return new Map(rows.map((r) => [r.id, r.name]));
  }

  /** Inserts a new campaign or writes the changed columns of a loaded one; answers its id. */
  async save(c: Campaign, tx?: Tx): Promise<number> {
    return (await this.repo(tx).save(c)).id;
  }

  /** Deletes the row (memberships cascade); answers whether it was there. */
  async delete(id: number, tx?: Tx): Promise<boolean> {
    return ((await this.repo(tx).delete({ id })).affected ?? 0) > 0;
  }

  /** Completes every campaign whose end has passed; answers the ids it changed with their old status. */
  async completeExpired(tx?: Tx): Promise<{ id: number; previousStatus: string }[]> {
    const result: unknown = await this.transactions.handle(tx).query(COMPLETE_EXPIRED_SQL);
    return rowsAndCount(result).rows as { id: number; previousStatus: string }[];
  }
}
