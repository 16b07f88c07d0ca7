import { columnMap } from '../database/column-map.js';
import { iso } from '../common/dates.js';
import type { ListSpec } from '../lists/list-spec.js';
import { PATTERN_FIELDS } from '../lists/filter-sql.js';
import { behaviourFields } from '../tracking/index.js';
import { Contact } from './contact.entity.js';

/** Row columns read beside the contact's own: the owner's and the primary company's names. */
interface ContactExtras {
  ownerName: string | null;
  companyName: string | null;
  pointGroups: ContactPointGroup[];
}

/** A point group a contact's points fall in (its tier). */
export interface ContactPointGroup {
  id: number;
  name: string;
  color: string | null;
}

const isoSql = (col: string) => `to_char(${col} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"+00:00"')`;

/**
 * The published point groups whose range holds `points` (an SQL expression), as a jsonb array of
 * { id, name, color } in id order: the contact's tiers. A scan of point_groups, a small table.
 */
export const pointGroupsSql = (points: string) =>
  `(SELECT coalesce(jsonb_agg(jsonb_build_object('id', g.id, 'name', g.name, 'color', g.color) ORDER BY g.id), '[]'::jsonb) FROM point_groups g WHERE g.is_published AND ${points} BETWEEN g.minimum_points AND g.maximum_points)`;

/** The record's `doNotContact` object as SQL from the sms columns (the same object as the map's TypeScript value). */
export const dncJson = (reason: string, since: string, comment: string) =>
  `jsonb_build_object('sms', CASE WHEN ${reason} IS NULL THEN NULL ELSE jsonb_build_object('reason', ${reason}, 'since', ${isoSql(since)}, 'comment', ${comment}) END)`;

/**
 * The contact's column map: the record's properties in the order the API shows them, which of them
 * a write sets, and the computed ones (companyRef, owner, doNotContact) in SQL and in TypeScript.
 * The owner's and the company's names are scalar subqueries, not joins: PostgreSQL plans a statement
 * of one table with two subplans in a fraction of the time of a three-table join, and runs a subplan
 * only for a contact that has an owner or a company (bench row "get contact by id").
 */
export const CONTACT_COLUMNS = columnMap<Contact, ContactExtras>(Contact, {
  ownerName: (c) => `CASE WHEN ${c}.owner_id IS NOT NULL THEN (SELECT u.name FROM users u WHERE u.id = ${c}.owner_id) END`,
  companyName: (c) => `CASE WHEN ${c}.company_id IS NOT NULL THEN (SELECT co.name FROM companies co WHERE co.id = ${c}.company_id) END`,
  pointGroups: (c) => pointGroupsSql(`${c}.points`),
})({
  id: {},
  name: { writable: true },
  email: { writable: true },
  externalId: { writable: true },
  phone: { writable: true },
  company: { writable: true },
  companyId: { writable: true },
  companyRef: {
    sql: (r) => `CASE WHEN ${r('companyId')} IS NULL THEN NULL ELSE jsonb_build_object('id', ${r('companyId')}, 'name', ${r('companyName')}) END`,
    value: (r) => (r.companyId !== null ? { id: r.companyId, name: r.companyName ?? '' } : null),
  },
  title: { writable: true },
  ownerId: { writable: true },
  owner: {
    sql: (r) => `CASE WHEN ${r('ownerId')} IS NULL THEN NULL ELSE jsonb_build_object('id', ${r('ownerId')}, 'name', ${r('ownerName')}) END`,
    value: (r) => (r.ownerId !== null ? { id: r.ownerId, name: r.ownerName } : null),
  },
  fields: { writable: true, orEmpty: true },
  points: {},
  pointGroups: {
    sql: (r) => r('pointGroups'),
    value: (r) => r.pointGroups,
  },
  createdAt: {},
  modifiedAt: {},
  createdBy: {},
  createdByUser: {},
  modifiedBy: {},
  modifiedByUser: {},
  doNotContact: {
    sql: (r) => dncJson(r('dncSmsReason'), r('dncSmsSince'), r('dncSmsComment')),
    value: (r) => doNotContactOf(r),
  },
  dncSmsReason: { record: false },
  dncSmsSince: { record: false },
  dncSmsComment: { record: false },
});

/** A contact with its owner's and company's names: what every read and write of the repository answers. */
export type ContactRow = Parameters<typeof CONTACT_COLUMNS.toRecord>[0];
/** The contact as the API returns it (and as its events carry it). */
export type ContactRecord = ReturnType<typeof CONTACT_COLUMNS.toRecord>;
/**
 * The writable columns of a contact. `companyFromRef`: the write sets `company` to the name of the
 * company `companyId` names (read in the same statement), instead of `company`.
 */
export type ContactValues = ReturnType<typeof CONTACT_COLUMNS.valuesOf> & { companyFromRef?: boolean };

/** The one mapper from a stored contact (with its owner's and company's names) to the API record. */
export const toContactRecord = (r: ContactRow): ContactRecord => CONTACT_COLUMNS.toRecord(r);

/** The record's `doNotContact` (the same object as dncJson builds for events). */
export function doNotContactOf(r: Pick<Contact, 'dncSmsReason' | 'dncSmsSince' | 'dncSmsComment'>) {
  return {
    sms: r.dncSmsReason ? { reason: r.dncSmsReason, since: iso(r.dncSmsSince) ?? '', comment: r.dncSmsComment ?? null } : null,
  };
}

/** The contacts list: its sortable and filterable columns and the record's properties (see lists/list.ts). */
export const CONTACT_LIST_SPEC: ListSpec = {
  name: 'contacts',
  sortable: {
    id: 'c.id',
    name: 'c.name',
    email: 'c.email',
    externalId: 'c.external_id',
    phone: 'c.phone',
    company: 'c.company',
    title: 'c.title',
    points: 'c.points',
    createdAt: 'c.created_at',
    modifiedAt: 'c.modified_at',
  },
  // search_text is the lower-cased text of name, email, phone, company, title and custom field
  // values, kept by a trigger and indexed with pg_trgm (see the platform migration).
  searchExpression: 'c.search_text',
  countTable: 'contacts',
  filters: {
    // dncSms=true: contacts opted out of text messages (partial index contacts_dnc_sms_idx).
    dncSms: { type: 'boolean', column: '(c.dnc_sms_reason IS NOT NULL)' },
  },
  // The fields of the `filter` parameter (the filter language, lists/filter.ts).
  filterable: {
    id: { type: 'id', sql: 'c.id' },
    name: { type: 'string', sql: 'c.name', textIndex: 'c.search_text' },
    email: { type: 'string', sql: 'c.email', textIndex: 'c.search_text' },
    externalId: { type: 'string', sql: 'c.external_id', description: 'the id a tracking client knows the contact by (its userId)' },
    phone: { type: 'string', sql: 'c.phone', textIndex: 'c.search_text' },
    company: { type: 'string', sql: 'c.company', textIndex: 'c.search_text' },
    title: { type: 'string', sql: 'c.title', textIndex: 'c.search_text' },
    'owner.id': { type: 'id', sql: 'c.owner_id' },
    ownerId: { type: 'id', sql: 'c.owner_id' },
    'company.id': { type: 'id', sql: 'c.company_id', description: 'the primary company (companyId)' },
    companyId: { type: 'id', sql: 'c.company_id' },
    'campaign.id': {
      type: 'membership',
      sql: '',
      membership: { table: 'campaign_members', recordColumn: 'contact_id', recordId: 'c.id', setColumn: 'campaign_id' },
      description: 'member of the campaign',
    },
    'segment.id': {
      type: 'membership',
      sql: '',
      membership: { table: 'segment_members', recordColumn: 'contact_id', recordId: 'c.id', setColumn: 'segment_id' },
      description: 'member of the segment (its materialised membership)',
    },
    'deals.status': {
      type: 'membership',
      sql: '',
      values: ['open', 'won', 'lost'],
      membership: { table: 'deals', recordColumn: 'contact_id', recordId: 'c.id', setColumn: 'status' },
      description: 'has a deal with this status (open, won, lost); isEmpty: has no deal',
    },
    'deals.stage.id': {
      type: 'membership',
      sql: '',
      membership: { table: 'deals', recordColumn: 'contact_id', recordId: 'c.id', setColumn: 'stage_id' },
      description: 'has a deal in this pipeline stage',
    },
    dncSms: { type: 'boolean', sql: '(c.dnc_sms_reason IS NOT NULL)', description: 'opted out of text messages' },
    points: { type: 'int', sql: 'c.points', description: 'the lead score (sum of the point ledger)' },
    'pointGroup.id': {
      type: 'membership',
      sql: '',
      membership: {
        table: 'point_groups',
        recordColumn: 'is_published',
        recordId: 'true',
        setColumn: 'id',
        match: 'm.is_published AND c.points BETWEEN m.minimum_points AND m.maximum_points',
      },
      description: "in the published point group: the contact's points are within its range",
    },
    createdAt: { type: 'datetime', sql: 'c.created_at' },
    modifiedAt: { type: 'datetime', sql: 'c.modified_at' },
    // events.<name>.count[.<window>], .firstAt, .lastAt: over the tracked events' daily counts (tracking/index.ts).
    [PATTERN_FIELDS]: behaviourFields('c'),
  },
  properties: [
    'id',
    'name',
    'email',
    'externalId',
    'phone',
    'company',
    'companyId',
    'companyRef',
    'title',
    'ownerId',
    'owner',
    'fields',
    'points',
    'pointGroups',
    'doNotContact',
    'createdAt',
    'modifiedAt',
    'createdBy',
    'createdByUser',
    'modifiedBy',
    'modifiedByUser',
  ],
  dynamicFilterDoc:
    'Behavioural fields over tracked events (README "Tracked events"): `events.<name>.count` and `events.<name>.count.<1d|7d|30d|90d>` (whole numbers: the events of that name, all kept time or on the last N UTC days, today included), `events.<name>.firstAt` and `events.<name>.lastAt` (date-times; isEmpty: never). `fields.<alias>` for each published contact custom field, typed by the field: text types take eq, neq, in, nin, contains, startsWith, endsWith, isEmpty, isNotEmpty; number, date and datetime also gt, gte, lt, lte, between; boolean and select eq, neq, in, nin, isEmpty, isNotEmpty; multiselect contains (has the option), in (has any of), nin (has none of), isEmpty, isNotEmpty',
};
