import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import type { DataSource, ObjectLiteral, SelectQueryBuilder } from 'typeorm';
import { registerConstraints } from '../common/constraints.js';
import type { Tx } from '../database/transactions.js';
import { outboxInsertSql } from '../events/events.repository.js';

registerConstraints({
  // The campaign and the contact are both named by the path: a missing one is a 404.
  campaign_members_campaign_id_fkey: { kind: 'reference', field: 'campaignId', target: 'campaign', status: 404 },
  campaign_members_contact_id_fkey: { kind: 'reference', field: 'contactId', target: 'contact', status: 404 },
});

/** A membership event's data, from a RETURNING row `m`. */
const MEMBERSHIP_JSON = `jsonb_build_object('campaignId', m.campaign_id, 'contactId', m.contact_id,
  'addedAt', to_char(m.added_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"+00:00"'))`;

/**
 * Every query of campaign_members. Raw SQL on purpose: the bench rows "add contact to campaign"
 * (one statement, the foreign keys answer whether campaign and contact exist) and "list a
 * campaign's contacts" (the total from the member rows) are served by these statements.
 */
@Injectable()
export class CampaignMembersRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  /**
   * Adds a membership; an existing one is left as it is. A missing campaign or contact fails with
   * the foreign key (campaign_members_campaign_id_fkey / _contact_id_fkey, registered as 404s).
   * Bench row: "add contact to campaign".
   */
  async add(campaignId: number, contactId: number, tx?: Tx): Promise<boolean> {
    // The campaign.contact_added event is written by the same statement, only for a new membership.
    const rows: { n: string }[] = await (tx ?? this.dataSource).query(
      `WITH m AS (INSERT INTO campaign_members (campaign_id, contact_id) VALUES ($1, $2)
                  ON CONFLICT (campaign_id, contact_id) DO NOTHING RETURNING campaign_id, contact_id, added_at),
            e AS (${outboxInsertSql(`'campaign.contact_added'`, MEMBERSHIP_JSON, 'NULL::jsonb', 'FROM m')})
       SELECT count(*) AS n FROM m`,
      [campaignId, contactId],
    );
    return Number(rows[0].n) > 0;
  }

  /** Removes a membership (and writes campaign.contact_removed in the same statement); answers whether there was one. */
  async remove(campaignId: number, contactId: number, tx?: Tx): Promise<boolean> {
    const rows: { n: string }[] = await (tx ?? this.dataSource).query(
      `WITH m AS (DELETE FROM campaign_members WHERE campaign_id = $1 AND contact_id = $2 RETURNING campaign_id, contact_id, added_at),
            e AS (${outboxInsertSql(`'campaign.contact_removed'`, MEMBERSHIP_JSON, 'NULL::jsonb', 'FROM m')})
       SELECT count(*) AS n FROM m`,
      [campaignId, contactId],
    );
    return Number(rows[0].n) > 0;
  }

  /** Number of members (every row names an existing contact, by its foreign key). Bench row: "list a campaign's contacts". */
  async count(campaignId: number, tx?: Tx): Promise<number> {
    const rows: { n: string }[] = await (tx ?? this.dataSource).query(`SELECT count(*)::bigint AS n FROM campaign_members WHERE campaign_id = $1`, [
      campaignId,
    ]);
    return Number(rows[0].n);
  }

  /**
   * For modifiedSince on a campaign's contacts: a member counts as changed when the contact changed
   * or when it joined the campaign (`campaignId` is a validated integer, inlined as a number).
   */
  memberChangedExpression(campaignId: number): string {
    return `GREATEST(COALESCE(c.modified_at, c.created_at),
      (SELECT m.added_at FROM campaign_members m WHERE m.contact_id = c.id AND m.campaign_id = ${Math.trunc(campaignId)}))`;
  }

  /** Narrows a contacts query (alias `c`) to the campaign's members. Bench row: "list a campaign's contacts". */
  memberScope(campaignId: number): <T extends ObjectLiteral>(qb: SelectQueryBuilder<T>) => void {
    return (qb) => {
      qb.andWhere('EXISTS (SELECT 1 FROM campaign_members m WHERE m.contact_id = c.id AND m.campaign_id = :campaignId)', { campaignId });
    };
  }
}
