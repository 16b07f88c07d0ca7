import { Injectable } from '@nestjs/common';
import type { ObjectLiteral, SelectQueryBuilder } from 'typeorm';
import { segmentMembershipLockSql } from '../database/advisory-locks.js';
import { Transactions, type Tx } from '../database/transactions.js';
import type { CompiledFilter } from '../lists/filter-sql.js';
import { auditFields, defineList, type ListQuery } from '../lists/list-spec.js';
import { type ListPage, paginate } from '../lists/list-sql.js';
import { BUILD_STATUSES, Segment, SEGMENT_TYPES } from './segment.entity.js';

export const SEGMENT_LIST_SPEC = defineList({
  name: 'segments',
  sortable: ['id', 'name', 'type', 'createdAt', 'modifiedAt'],
  searchExpression: `lower(coalesce(s.name, '') || ' ' || coalesce(s.description, ''))`,
  filters: { type: { type: 'string', column: 's.type', values: SEGMENT_TYPES } },
  fields: {
    id: { type: 'id', sql: 's.id' },
    name: { type: 'string', sql: 's.name' },
    description: { type: 'string', sql: 's.description' },
    type: { type: 'enum', sql: 's.type', values: SEGMENT_TYPES },
    'membership.status': { type: 'enum', sql: 's.build_status', values: BUILD_STATUSES },
    ...auditFields('s'),
  },
  properties: [
    'id',
    'name',
    'description',
    'type',
    'filter',
    'membership',
    'createdAt',
    'modifiedAt',
    'createdBy',
    'createdByUser',
    'modifiedBy',
    'modifiedByUser',
  ],
});

/** Event types whose contacts a refresh re-evaluates, and where the contact id is in their data. */
export const CHANGE_EVENTS = {
  'contact.created': 'id',
  'contact.updated': 'id',
  'campaign.contact_added': 'contactId',
  'campaign.contact_removed': 'contactId',
} as const;

/**
 * Every query of segments, segment_members and segment_refresh_state. Membership statements are
 * set-based SQL over the contacts table (a read, with the WHERE compiled from the segment's filter
 * by the shared filter compiler, every value a bound parameter); bench/segments.mjs measures them.
 */
@Injectable()
export class SegmentsRepository {
  constructor(private readonly transactions: Transactions) {}

  private repo(tx?: Tx) {
    return this.transactions.manager(tx).getRepository(Segment);
  }

  create(): Segment {
    return this.repo().create();
  }

  list(q: ListQuery): Promise<ListPage<Segment>> {
    return paginate(this.repo().createQueryBuilder('s'), q, SEGMENT_LIST_SPEC);
  }

  findRecord(id: number, tx?: Tx): Promise<Segment | null> {
    return this.repo(tx).findOne({ where: { id } });
  }

  /**
   * The row, locked until `tx` ends against other edits and deletes (FOR NO KEY UPDATE, which does
   * not wait for a rebuild: membership inserts hold only FOR KEY SHARE on it).
   */
  findForUpdate(id: number, tx: Tx): Promise<Segment | null> {
    return this.repo(tx).findOne({ where: { id }, lock: { mode: 'for_no_key_update' } });
  }

  async save(s: Segment, tx: Tx): Promise<number> {
    return (await this.repo(tx).save(s)).id;
  }

  async delete(id: number, tx: Tx): Promise<boolean> {
    return ((await this.repo(tx).delete({ id })).affected ?? 0) > 0;
  }

  async exists(id: number, tx?: Tx): Promise<boolean> {
    const rows: unknown[] = await this.transactions.handle(tx).query(`SELECT 1 FROM segments WHERE id = $1`, [id]);
    return rows.length > 0;
  }

  /** Members of each segment, by id (index-only counts on the primary key). */
  async counts(ids: number[], tx?: Tx): Promise<Map<number, number>> {
    if (!ids.length) return new Map();
    const rows: { id: number; n: string }[] = await this.transactions
      .handle(tx)
      .query(`SELECT s.id, (SELECT count(*) FROM segment_members m WHERE m.segment_id = s.id) AS n FROM unnest($1::int[]) AS s(id)`, [ids]);
    return new Map(rows.map((r) => [r.id, Number(r.n)]));
  }

  async count(id: number, tx?: Tx): Promise<number> {
    return (await this.counts([id], tx)).get(id) ?? 0;
  }

  /** Narrows a contacts query (alias `c`) to the segment's members. */
  memberScope(segmentId: number): <T extends ObjectLiteral>(qb: SelectQueryBuilder<T>) => void {
    return (qb) => {
      qb.andWhere('EXISTS (SELECT 1 FROM segment_members sm WHERE sm.contact_id = c.id AND sm.segment_id = :segmentId)', { segmentId });
    };
  }

  /** For modifiedSince on a segment's contacts: a member counts as changed when the contact changed or when it joined. */
  memberChangedExpression(segmentId: number): string {
    return `GREATEST(COALESCE(c.modified_at, c.created_at),
      (SELECT sm.added_at FROM segment_members sm WHERE sm.contact_id = c.id AND sm.segment_id = ${Math.trunc(segmentId)}))`;
  }

  /** The segments a contact belongs to, by segment id. */
  async ofContact(contactId: number): Promise<{ id: number; name: string; type: string; added_at: Date }[]> {
    return this.transactions.db.query(
      `SELECT s.id, s.name, s.type, m.added_at FROM segment_members m JOIN segments s ON s.id = m.segment_id
        WHERE m.contact_id = $1 ORDER BY s.id`,
      [contactId],
    );
  }

  /** Waits for (and then holds, until `tx` ends) the segment's membership lock (common/advisory-locks.ts). */
  async lockMembership(segmentId: number, tx: Tx): Promise<void> {
    await tx.query(segmentMembershipLockSql('$1'), [segmentId]);
  }

  /** The compiled filter as `SELECT c.id FROM contacts c WHERE ...` with positional parameters $1..$n. */
  private matching(filter: CompiledFilter, extraWhere?: string): { sql: string; params: unknown[] } {
    const qb = this.transactions.manager().createQueryBuilder().select('c.id', 'id').from('contacts', 'c').where(`(${filter.sql})`, filter.params);
    const [sql, params] = qb.getQueryAndParameters();
    return { sql: extraWhere ? `${sql} AND ${extraWhere.replaceAll('$$n', () => `$${params.length + 1}`)}` : sql, params };
  }

  /**
   * A full rebuild, set-based (the caller holds the membership lock): inserts every matching contact
   * that is not a member, then deletes every member that no longer matches (an anti-join). Answers
   * the contacts added and removed (ids), for the campaigns that mirror the segment.
   */
  async rebuild(segmentId: number, filter: CompiledFilter, tx: Tx): Promise<{ added: number; removed: number }> {
    const m = this.matching(filter);
    const n = m.params.length;
    const added: { n: string }[] = await tx.query(
      `WITH ins AS (INSERT INTO segment_members (segment_id, contact_id) SELECT $${n + 1}::int, f.id FROM (${m.sql}) f
                    ON CONFLICT (segment_id, contact_id) DO NOTHING RETURNING 1)
       SELECT count(*) AS n FROM ins`,
      [...m.params, segmentId],
    );
    const removed: { n: string }[] = await tx.query(
      `WITH del AS (DELETE FROM segment_members sm WHERE sm.segment_id = $${n + 1}::int
                       AND NOT EXISTS (SELECT 1 FROM (${m.sql}) f WHERE f.id = sm.contact_id) RETURNING 1)
       SELECT count(*) AS n FROM del`,
      [...m.params, segmentId],
    );
    return { added: Number(added[0].n), removed: Number(removed[0].n) };
  }

  /**
   * Re-evaluates the given contacts against the segment's filter in one statement (the caller holds
   * the membership lock): those that match join, members that no longer match (or are gone) leave.
   * Answers the ids that joined and left.
   */
  async reevaluate(segmentId: number, filter: CompiledFilter, contactIds: number[], tx: Tx): Promise<{ added: number[]; removed: number[] }> {
    const m = this.matching(filter, 'c.id = ANY($$n::int[])');
    const n = m.params.length;
    const rows: { added: number[] | null; removed: number[] | null }[] = await tx.query(
      `WITH f AS MATERIALIZED (${m.sql}),
            ins AS (INSERT INTO segment_members (segment_id, contact_id) SELECT $${n + 2}::int, f.id FROM f
                    ON CONFLICT (segment_id, contact_id) DO NOTHING RETURNING contact_id),
            del AS (DELETE FROM segment_members sm WHERE sm.segment_id = $${n + 2}::int AND sm.contact_id = ANY($${n + 1}::int[])
                      AND NOT EXISTS (SELECT 1 FROM f WHERE f.id = sm.contact_id) RETURNING contact_id)
       SELECT (SELECT array_agg(contact_id ORDER BY contact_id) FROM ins) AS added, (SELECT array_agg(contact_id ORDER BY contact_id) FROM del) AS removed`,
      [...m.params, contactIds, segmentId],
    );
    return { added: rows[0].added ?? [], removed: rows[0].removed ?? [] };
  }

  /**
   * A static segment's batch in one statement (the caller holds the membership lock): adds the
   * existing contacts of `add` (locked FOR KEY SHARE so none can vanish midway), removes those of
   * `remove`. Answers what changed and the ids that name no contact.
   */
  async batch(
    segmentId: number,
    add: number[],
    remove: number[],
    tx: Tx,
  ): Promise<{ added: number[]; addFound: number; removed: number[]; removeFound: number; notFound: number[] }> {
    const rows: { added: number[] | null; add_found: string; removed: number[] | null; remove_found: string; not_found: number[] | null }[] = await tx.query(
      `WITH wanted_add AS (SELECT DISTINCT unnest($2::int[]) AS contact_id),
            wanted_remove AS (SELECT DISTINCT unnest($3::int[]) AS contact_id),
            found_add AS (SELECT c.id FROM contacts c WHERE c.id IN (SELECT contact_id FROM wanted_add) ORDER BY c.id FOR KEY SHARE),
            found_remove AS (SELECT c.id FROM contacts c WHERE c.id IN (SELECT contact_id FROM wanted_remove)),
            ins AS (INSERT INTO segment_members (segment_id, contact_id) SELECT $1, f.id FROM found_add f ORDER BY f.id
                    ON CONFLICT (segment_id, contact_id) DO NOTHING RETURNING contact_id),
            del AS (DELETE FROM segment_members x WHERE x.segment_id = $1 AND x.contact_id IN (SELECT contact_id FROM wanted_remove) RETURNING x.contact_id)
       SELECT (SELECT array_agg(contact_id) FROM ins) AS added, (SELECT count(*) FROM found_add) AS add_found,
              (SELECT array_agg(contact_id) FROM del) AS removed, (SELECT count(*) FROM found_remove) AS remove_found,
              (SELECT array_agg(w.contact_id ORDER BY w.contact_id) FROM (SELECT contact_id FROM wanted_add UNION SELECT contact_id FROM wanted_remove) w
                WHERE NOT EXISTS (SELECT 1 FROM contacts c WHERE c.id = w.contact_id)) AS not_found`,
      [segmentId, add, remove],
    );
    const r = rows[0];
    return {
      added: r.added ?? [],
      addFound: Number(r.add_found),
      removed: r.removed ?? [],
      removeFound: Number(r.remove_found),
      notFound: r.not_found ?? [],
    };
  }

  /** Dynamic segments whose members were not built for their current filter (and did not fail for it), oldest change first. */
  async pendingBuilds(): Promise<number[]> {
    const rows: { id: number }[] = await this.transactions.db.query(
      `SELECT id FROM segments WHERE type = 'dynamic' AND built_version IS DISTINCT FROM filter_version ORDER BY modified_at NULLS FIRST, id`,
    );
    return rows.map((r) => r.id);
  }

  /** The ids of the dynamic segments, ascending (the order their membership locks are taken in). */
  async dynamicSegments(tx?: Tx): Promise<{ id: number }[]> {
    return this.transactions.handle(tx).query(`SELECT id FROM segments WHERE type = 'dynamic' ORDER BY id`);
  }

  /**
   * Built dynamic segments whose whole-membership re-evaluation for time (a windowed count, a
   * relative date) was last done before `before` (by the injected clock), never, or after `now`
   * (the clock was moved back).
   */
  async dueForTimeRefresh(before: Date, now: Date): Promise<{ id: number }[]> {
    return this.transactions.db.query(
      `SELECT id FROM segments WHERE type = 'dynamic' AND built_version = filter_version
          AND (time_evaluated_at IS NULL OR time_evaluated_at < $1 OR time_evaluated_at > $2) ORDER BY id`,
      [before, now],
    );
  }

  /** Records when a segment's membership was last re-evaluated for time. */
  async markTimeEvaluated(id: number, at: Date, tx: Tx): Promise<void> {
    await tx.query(`UPDATE segments SET time_evaluated_at = $2 WHERE id = $1`, [id, at]);
  }

  /** Notes when a rebuild starts (its own statement: the rebuild's transaction takes no lock on the segment's row until it ends). */
  async markBuildStarted(id: number): Promise<void> {
    await this.transactions.db.query(`UPDATE segments SET build_started_at = clock_timestamp() WHERE id = $1`, [id]);
  }

  /** Records a build of `version` as done (or failed): only while that version is still the current one. */
  async finishBuild(id: number, version: number, error: string | null, tx?: Tx): Promise<void> {
    await this.transactions.handle(tx).query(
      `UPDATE segments SET built_version = $2, build_status = CASE WHEN $3::text IS NULL THEN 'ready' ELSE 'failed' END,
              built_at = CASE WHEN $3::text IS NULL THEN clock_timestamp() ELSE built_at END, build_error = $3
        WHERE id = $1 AND filter_version = $2`,
      [id, version, error],
    );
  }

  /**
   * The refresh cursor, locked until `tx` ends; null when another process holds it (that one is
   * refreshing). Also the feed's pruned position: a cursor below it has missed events.
   */
  async lockCursor(tx: Tx): Promise<{ lastSequence: number; prunedThrough: number; feedSequence: number } | null> {
    const rows: { last_sequence: string; pruned_through: string; feed: string }[] = await tx.query(
      `SELECT r.last_sequence, f.pruned_through, f.last_sequence AS feed
         FROM segment_refresh_state r, event_feed_state f FOR UPDATE OF r SKIP LOCKED`,
    );
    return rows[0] ? { lastSequence: Number(rows[0].last_sequence), prunedThrough: Number(rows[0].pruned_through), feedSequence: Number(rows[0].feed) } : null;
  }

  async advanceCursor(sequence: number, tx: Tx): Promise<void> {
    await tx.query(`UPDATE segment_refresh_state SET last_sequence = GREATEST(last_sequence, $1), refreshed_at = now()`, [sequence]);
  }

  /** Marks every dynamic segment for a full rebuild (the refresh missed events: they were pruned before it read them). */
  async requireRebuildAll(tx: Tx): Promise<void> {
    await tx.query(`UPDATE segments SET built_version = NULL, build_status = 'building' WHERE type = 'dynamic'`);
  }

  /** Asks for a rebuild of the segment's current filter (POST /api/segments/{id}/rebuild). */
  async requireRebuild(id: number, tx: Tx): Promise<void> {
    await tx.query(`UPDATE segments SET built_version = NULL, build_status = 'building', build_error = NULL WHERE id = $1 AND type = 'dynamic'`, [id]);
  }
}
