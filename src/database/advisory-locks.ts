/**
 * Advisory lock keys shared by features (two-int form: `pg_advisory_xact_lock(key, id)`).
 *
 * SEGMENT_MEMBERSHIP: one segment's materialised membership. Held (until the transaction ends) by
 * whatever writes a segment's members or copies them: its rebuild, the re-evaluation of changed
 * contacts, a static batch, and a campaign that starts mirroring the segment; so a copy never reads
 * a half-written membership and a rebuild never overwrites a newer re-evaluation.
 */
export const ADVISORY_LOCKS = {
  segmentMembership: 0x73676d74, // 'sgmt'
} as const;

/** The SQL that takes a segment's membership lock; `$n` is the segment id's parameter. */
export const segmentMembershipLockSql = (param: string) => `SELECT pg_advisory_xact_lock(${ADVISORY_LOCKS.segmentMembership}, ${param}::int)`;
