import { Injectable } from '@nestjs/common';
import type { ObjectLiteral, SelectQueryBuilder } from 'typeorm';
import { segmentMembershipLockSql } from '../database/advisory-locks.js';
import { registerConstraints } from '../database/constraints.js';
import { AppError } from '../common/errors.js';
import { prepared, Transactions, type Tx } from '../database/transactions.js';
import { outboxInsertSql } from '../database/outbox.js';

registerConstraints({
  // The campaign and the contact are both named by the path: a missing one is a 404.
  campaign_members_campaign_id_fkey: { kind: 'reference', field: 'campaignId', target: 'campaign', status: 404 },
  campaign_members_contact_id_fkey: { kind: 'reference', field: 'contactId', target: 'contact', status: 404 },
});

/** A campaign that mirrors a segment refuses membership changes by hand (409). */
export function mirroredError(campaignId: number, segmentId: number): AppError {
  return new AppError(
    'conflict',
    `Campaign ${campaignId} mirrors segment ${segmentId}: its members follow the segment's (change the segment, or clear the campaign's segmentId)`,
    [{ field: 'segmentId', message: `the campaign mirrors segment ${segmentId}` }],
  );
}

/** A membership event's data, from a RETURNING row `m`. */
const MEMBERSHIP_JSON = `jsonb_build_object('campaignId', m.campaign_id, 'contactId', m.contact_id,
  'addedAt', to_char(m.added_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"+00:00"'))`;

/**
 * Bench row "add contact to campaign": the membership and its campaign.contact_added event in one
 * prepared statement. The event is written only for a new membership; a campaign that mirrors a
 * segment takes no membership by hand (nothing is inserted, `mirrored` names the segment). The
 * campaign row is held FOR SHARE so its segmentId cannot change before the statement commits.
 */
const ADD_MEMBER = prepared(`WITH cp AS (SELECT segment_id FROM campaigns WHERE id = $1 FOR SHARE),
            s AS (SELECT segment_id FROM cp WHERE segment_id IS NOT NULL),
            m AS (INSERT INTO campaign_members (campaign_id, contact_id) SELECT $1, $2 WHERE NOT EXISTS (SELECT 1 FROM s)
                  ON CONFLICT (campaign_id, contact_id) DO NOTHING RETURNING campaign_id, contact_id, added_at),
            e AS (${outboxInsertSql(`'campaign.contact_added'`, MEMBERSHIP_JSON, 'NULL::jsonb', 'FROM m')})
       SELECT count(*) AS n, (SELECT segment_id FROM s) AS mirrored FROM m`);

/**
 * Every query of campaign_members. Raw SQL on purpose: the bench rows "add contact to campaign"
 * (one statement, the foreign keys answer whether campaign and contact exist) and "list a
 * campaign's contacts" (the total from the member rows) are served by these statements.
 */
@Injectable()
export class CampaignMembersRepository {
  constructor(private readonly transactions: Transactions) {}

  /**
   * Adds a membership; an existing one is left as it is. A missing campaign or contact fails with
   * the foreign key (campaign_members_campaign_id_fkey / _contact_id_fkey, registered as 404s).
   * Bench row: "add contact to campaign".
   */
  async add(campaignId: number, contactId: number, tx?: Tx): Promise<boolean> {
    const rows: { n: string; mirrored: number | null }[] = await (tx ?? this.transactions.db).query(ADD_MEMBER, [campaignId, contactId]);
    if (rows[0].mirrored !== null) throw mirroredError(campaignId, rows[0].mirrored);
    return Number(rows[0].n) > 0;
  }

  /**
   * Refuses (409) a change by hand of a campaign that mirrors a segment; the campaign row is held
   * FOR SHARE until `tx` ends, so its segmentId cannot change meanwhile. Nothing when it does not exist.
   */
  async assertNotMirrored(campaignId: number, tx: Tx): Promise<void> {
    const rows: { segment_id: number | null }[] = await tx.query(`SELECT segment_id FROM campaigns WHERE id = $1 FOR SHARE`, [campaignId]);
    const segmentId = rows[0]?.segment_id ?? null;
    if (segmentId !== null) throw mirroredError(campaignId, segmentId);
  }

  /** Waits for (and holds until `tx` ends) the membership lock of a segment before its members are copied (common/advisory-locks.ts). */
  async lockSegment(segmentId: number, tx: Tx): Promise<void> {
    await tx.query(segmentMembershipLockSql('$1'), [segmentId]);
  }

  /**
   * Mirrors a segment's members into the campaigns whose segment_id is that segment (or into one of
   * them, `campaignId`), set-based, in one statement: members of the segment that are not members
   * of the campaign join, members of the campaign that are not in the segment leave, each with its
   * campaign.contact_added / _removed event. `contactIds` limits the comparison to those contacts
   * (the ones a refresh changed); null compares every member. Reads segment_members (the segments
   * feature's table) in the same statement; the caller holds that segment's membership lock.
   * Answers how many joined and left.
   */
  async mirror(segmentId: number, opts: { campaignId?: number; contactIds?: number[] | null }, tx: Tx): Promise<{ added: number; removed: number }> {
    const rows: { added: string; removed: string }[] = await tx.query(
      `WITH camp AS (SELECT id FROM campaigns WHERE segment_id = $1 AND ($2::int IS NULL OR id = $2)),
            want AS (SELECT sm.contact_id FROM segment_members sm WHERE sm.segment_id = $1 AND ($3::int[] IS NULL OR sm.contact_id = ANY($3::int[]))),
            m AS (INSERT INTO campaign_members (campaign_id, contact_id) SELECT camp.id, want.contact_id FROM camp, want ORDER BY 1, 2
                  ON CONFLICT (campaign_id, contact_id) DO NOTHING RETURNING campaign_id, contact_id, added_at),
            d AS (DELETE FROM campaign_members x USING camp WHERE x.campaign_id = camp.id AND ($3::int[] IS NULL OR x.contact_id = ANY($3::int[]))
                    AND NOT EXISTS (SELECT 1 FROM segment_members sm WHERE sm.segment_id = $1 AND sm.contact_id = x.contact_id)
                  RETURNING x.campaign_id, x.contact_id, x.added_at),
            e1 AS (${outboxInsertSql(`'campaign.contact_added'`, MEMBERSHIP_JSON, 'NULL::jsonb', 'FROM (SELECT * FROM m ORDER BY campaign_id, contact_id) m')}),
            e2 AS (${outboxInsertSql(`'campaign.contact_removed'`, MEMBERSHIP_JSON, 'NULL::jsonb', 'FROM (SELECT * FROM d ORDER BY campaign_id, contact_id) m')})
       SELECT (SELECT count(*) FROM m) AS added, (SELECT count(*) FROM d) AS removed`,
      [segmentId, opts.campaignId ?? null, opts.contactIds ?? null],
    );
    return { added: Number(rows[0].added), removed: Number(rows[0].removed) };
  }

  /** Which of these segments some campaign mirrors. */
  async mirroredSegments(segmentIds: number[], tx?: Tx): Promise<Set<number>> {
    if (!segmentIds.length) return new Set();
    const rows: { segment_id: number }[] = await this.transactions
      .handle(tx)
      .query(`SELECT DISTINCT segment_id FROM campaigns WHERE segment_id = ANY($1::int[])`, [segmentIds]);
    return new Set(rows.map((r) => r.segment_id));
  }

  /** Removes a membership (and writes campaign.contact_removed in the same statement); answers whether there was one. */
  async remove(campaignId: number, contactId: number, tx?: Tx): Promise<boolean> {
    const rows: { n: string }[] = await this.transactions.handle(tx).query(
      `WITH m AS (DELETE FROM campaign_members WHERE campaign_id = $1 AND contact_id = $2 RETURNING campaign_id, contact_id, added_at),
            e AS (${outboxInsertSql(`'campaign.contact_removed'`, MEMBERSHIP_JSON, 'NULL::jsonb', 'FROM m')})
       SELECT count(*) AS n FROM m`,
      [campaignId, contactId],
    );
    return Number(rows[0].n) > 0;
  }

  /**
   * Adds and removes many memberships in one statement (set-based). The campaign is locked against
   * deletion (FOR KEY SHARE) and so are the contacts to add, so no foreign key can fail midway; a
   * membership another request adds meanwhile is counted as already there (ON CONFLICT DO NOTHING).
   * Each membership created or removed writes its event in the same statement. `campaign` is false
   * when the campaign does not exist (then nothing changed).
   */
  async batch(
    campaignId: number,
    add: number[],
    remove: number[],
    tx?: Tx,
  ): Promise<{ campaign: boolean; added: number; addFound: number; removed: number; removeFound: number; notFound: number[] }> {
    const rows: { campaign: boolean; added: string; add_found: string; removed: string; remove_found: string; not_found: number[] | null }[] =
      await this.transactions.handle(tx).query(
        `WITH campaign AS (SELECT id FROM campaigns WHERE id = $1 FOR KEY SHARE),
            wanted_add AS (SELECT DISTINCT unnest($2::int[]) AS contact_id),
            wanted_remove AS (SELECT DISTINCT unnest($3::int[]) AS contact_id),
            found_add AS (SELECT c.id FROM contacts c WHERE c.id IN (SELECT contact_id FROM wanted_add) ORDER BY c.id FOR KEY SHARE),
            found_remove AS (SELECT c.id FROM contacts c WHERE c.id IN (SELECT contact_id FROM wanted_remove)),
            m AS (INSERT INTO campaign_members (campaign_id, contact_id)
                  SELECT $1, f.id FROM found_add f WHERE EXISTS (SELECT 1 FROM campaign) ORDER BY f.id
                  ON CONFLICT (campaign_id, contact_id) DO NOTHING RETURNING campaign_id, contact_id, added_at),
            d AS (DELETE FROM campaign_members x WHERE x.campaign_id = $1 AND x.contact_id IN (SELECT contact_id FROM wanted_remove)
                  RETURNING x.campaign_id, x.contact_id, x.added_at),
            e1 AS (${outboxInsertSql(`'campaign.contact_added'`, MEMBERSHIP_JSON, 'NULL::jsonb', 'FROM (SELECT * FROM m ORDER BY contact_id) m')}),
            e2 AS (${outboxInsertSql(`'campaign.contact_removed'`, MEMBERSHIP_JSON, 'NULL::jsonb', 'FROM (SELECT * FROM d ORDER BY contact_id) m')})
       SELECT EXISTS (SELECT 1 FROM campaign) AS campaign,
              (SELECT count(*) FROM m) AS added, (SELECT count(*) FROM found_add) AS add_found,
              (SELECT count(*) FROM d) AS removed, (SELECT count(*) FROM found_remove) AS remove_found,
              (SELECT array_agg(w.contact_id ORDER BY w.contact_id) FROM (SELECT contact_id FROM wanted_add UNION SELECT contact_id FROM wanted_remove) w
                WHERE NOT EXISTS (SELECT 1 FROM contacts c WHERE c.id = w.contact_id)) AS not_found`,
        [campaignId, add, remove],
      );
    const r = rows[0];
    return {
      campaign: r.campaign,
      added: Number(r.added),
      addFound: Number(r.add_found),
      removed: Number(r.removed),
      removeFound: Number(r.remove_found),
      notFound: r.not_found ?? [],
    };
  }

  /** Number of members (every row names an existing contact, by its foreign key). Bench row: "list a campaign's contacts". */
  async count(campaignId: number, tx?: Tx): Promise<number> {
    const rows: { n: string }[] = await this.transactions
      .handle(tx)
      .query(`SELECT count(*)::bigint AS n FROM campaign_members WHERE campaign_id = $1`, [campaignId]);
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
