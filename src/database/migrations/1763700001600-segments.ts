import { type MigrationInterface, type QueryRunner } from 'typeorm';

/**
 * Segments: saved sets of contacts, dynamic (a filter, membership materialised in
 * segment_members and kept fresh by the segments jobs) or static (members added by hand).
 *
 * - `filter_version` grows with every filter change; a rebuild records the version it built in
 *   `built_version`, so the build status is `ready` only when the members match the current filter.
 * - segment_members rows go with their segment or their contact (ON DELETE CASCADE); the index by
 *   contact serves GET /api/contacts/{id}/segments, the cascade and the `segment.id` filter.
 * - segment_refresh_state: the event-feed sequence up to which contact changes have been
 *   re-evaluated against the dynamic segments. It starts at the feed's current position.
 * - campaigns.segment_id: a campaign that mirrors a segment's members (SET NULL when the segment
 *   goes; the service detaches campaigns itself first, with their events).
 */
export class Segments1763700001600 implements MigrationInterface {
  name = 'Segments1763700001600';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE segments (
        id               serial PRIMARY KEY,
        name             text NOT NULL,
        description      text NULL,
        type             text NOT NULL CONSTRAINT segments_type_check CHECK (type IN ('dynamic', 'static')),
        filter           jsonb NULL,
        filter_version   integer NOT NULL DEFAULT 1,
        build_status     text NOT NULL DEFAULT 'ready' CONSTRAINT segments_build_status_check CHECK (build_status IN ('building', 'ready', 'failed')),
        built_version    integer NULL,
        build_started_at timestamptz NULL,
        built_at         timestamptz NULL,
        build_error      text NULL,
        created_at       timestamptz NOT NULL DEFAULT now(),
        modified_at      timestamptz NULL DEFAULT now(),
        created_by       integer NULL REFERENCES users(id) ON DELETE SET NULL,
        created_by_user  text NULL,
        modified_by      integer NULL REFERENCES users(id) ON DELETE SET NULL,
        modified_by_user text NULL,
        CONSTRAINT segments_filter_check CHECK ((type = 'dynamic') = (filter IS NOT NULL))
      )`);
    for (const col of ['name', 'created_at', 'modified_at']) {
      await q.query(`CREATE INDEX segments_${col}_idx ON segments (${col}, id)`);
    }
    await q.query(`CREATE INDEX segments_changed_at_idx ON segments ((COALESCE(modified_at, created_at)))`);
    await q.query(`CREATE INDEX segments_dynamic_idx ON segments (id) WHERE type = 'dynamic'`);
    await q.query(`
      CREATE TABLE segment_members (
        segment_id integer NOT NULL CONSTRAINT segment_members_segment_id_fkey REFERENCES segments(id) ON DELETE CASCADE,
        contact_id integer NOT NULL CONSTRAINT segment_members_contact_id_fkey REFERENCES contacts(id) ON DELETE CASCADE,
        added_at   timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (segment_id, contact_id)
      )`);
    await q.query(`CREATE INDEX segment_members_contact_idx ON segment_members (contact_id, segment_id)`);
    await q.query(`
      CREATE TABLE segment_refresh_state (
        id            boolean PRIMARY KEY DEFAULT true CHECK (id),
        last_sequence bigint NOT NULL DEFAULT 0,
        refreshed_at  timestamptz NULL
      )`);
    await q.query(`INSERT INTO segment_refresh_state (last_sequence) SELECT last_sequence FROM event_feed_state`);
    // A nullable column without a default: no table rewrite.
    await q.query(`ALTER TABLE campaigns ADD COLUMN segment_id integer NULL CONSTRAINT campaigns_segment_id_fkey REFERENCES segments(id) ON DELETE SET NULL`);
    await q.query(`CREATE INDEX campaigns_segment_id_idx ON campaigns (segment_id) WHERE segment_id IS NOT NULL`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE campaigns DROP COLUMN segment_id`);
    await q.query(`DROP TABLE segment_refresh_state`);
    await q.query(`DROP TABLE segment_members`);
    await q.query(`DROP TABLE segments`);
  }
}
