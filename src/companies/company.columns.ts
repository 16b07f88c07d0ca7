import { columnMap } from '../database/column-map.js';
import type { ListSpec } from '../lists/list-spec.js';
import type { UpdateCompanyDto } from './company.dto.js';
import { Company } from './company.entity.js';

/** Row columns read beside the company's own: the owner's name. */
interface CompanyExtras {
  ownerName: string | null;
}

/**
 * The company's column map: the record's properties in the order the API shows them, which of them
 * a write sets (create, PUT and PATCH assign them, see CompaniesService), and the computed owner.
 */
export const COMPANY_COLUMNS = columnMap<Company, CompanyExtras>(Company, {
  ownerName: (co) => `CASE WHEN ${co}.owner_id IS NOT NULL THEN (SELECT u.name FROM users u WHERE u.id = ${co}.owner_id) END`,
})({
  id: {},
  name: { writable: true },
  domain: { writable: true },
  phone: { writable: true },
  website: { writable: true },
  industry: { writable: true },
  size: { writable: true },
  address1: { writable: true },
  address2: { writable: true },
  city: { writable: true },
  state: { writable: true },
  zipcode: { writable: true },
  country: { writable: true },
  description: { writable: true },
  ownerId: { writable: true },
  owner: {
    sql: (r) => `CASE WHEN ${r('ownerId')} IS NULL THEN NULL ELSE jsonb_build_object('id', ${r('ownerId')}, 'name', ${r('ownerName')}) END`,
    value: (r) => (r.ownerId !== null ? { id: r.ownerId, name: r.ownerName } : null),
  },
  fields: { writable: true, orEmpty: true },
  createdAt: {},
  modifiedAt: {},
  createdBy: {},
  createdByUser: {},
  modifiedBy: {},
  modifiedByUser: {},
});

/** A company as the API returns it (and as its events carry it). */
export type CompanyRecord = ReturnType<typeof COMPANY_COLUMNS.toRecord>;

/** The one mapper from a company (with its owner's name) to the API record. */
export const toCompanyRecord = (c: Company, ownerName: string | null): CompanyRecord => COMPANY_COLUMNS.toRecord(Object.assign({ ownerName }, c));

type Both = keyof Company & keyof UpdateCompanyDto;
/** A nullable text property of both the entity and the body. */
type PlainTextKey = { [K in Both]: Company[K] extends string | null ? (null extends Company[K] ? K : never) : never }[Both];

/** Text properties stored as given (trimmed; blank means none): the writable text columns without a rule of their own. */
export const PLAIN_TEXT_PROPERTIES = COMPANY_COLUMNS.writable
  .filter((w) => w.type === 'text' && !['name', 'domain', 'website', 'phone'].includes(w.property))
  .map((w) => w.property) as PlainTextKey[];

/** The companies list: its sortable and filterable columns and the record's properties (see lists/list.ts). */
export const COMPANY_LIST_SPEC: ListSpec = {
  name: 'companies',
  sortable: {
    id: 'co.id',
    name: 'co.name',
    domain: 'co.domain',
    industry: 'co.industry',
    size: 'co.size',
    city: 'co.city',
    country: 'co.country',
    createdAt: 'co.created_at',
    modifiedAt: 'co.modified_at',
  },
  // Same expression as the companies_search_trgm index (name, domain, industry).
  searchExpression: 'sf_text(co.name, co.domain, co.industry)',
  filters: {
    ownerId: { type: 'int', column: 'co.owner_id' },
    industry: { type: 'string', column: 'co.industry' },
    country: { type: 'string', column: 'co.country' },
  },
  countTable: 'companies',
  // The fields of the `filter` parameter: the company's own properties; `fields.<alias>` of each published company field is
  // added at request time by CompaniesService (as contacts add theirs).
  filterable: {
    id: { type: 'id', sql: 'co.id' },
    name: { type: 'string', sql: 'co.name' },
    domain: { type: 'string', sql: 'co.domain' },
    phone: { type: 'string', sql: 'co.phone' },
    website: { type: 'string', sql: 'co.website' },
    industry: { type: 'string', sql: 'co.industry' },
    size: { type: 'int', sql: 'co.size' },
    address1: { type: 'string', sql: 'co.address1' },
    address2: { type: 'string', sql: 'co.address2' },
    city: { type: 'string', sql: 'co.city' },
    state: { type: 'string', sql: 'co.state' },
    zipcode: { type: 'string', sql: 'co.zipcode' },
    country: { type: 'string', sql: 'co.country' },
    description: { type: 'string', sql: 'co.description' },
    ownerId: { type: 'id', sql: 'co.owner_id' },
    'owner.id': { type: 'id', sql: 'co.owner_id' },
    'deals.status': {
      type: 'membership',
      sql: '',
      values: ['open', 'won', 'lost'],
      membership: { table: 'deals', recordColumn: 'company_id', recordId: 'co.id', setColumn: 'status' },
      description: 'has a deal with this status (open, won, lost); isEmpty: has no deal',
    },
    'deals.stage.id': {
      type: 'membership',
      sql: '',
      membership: { table: 'deals', recordColumn: 'company_id', recordId: 'co.id', setColumn: 'stage_id' },
      description: 'has a deal in this pipeline stage',
    },
    createdAt: { type: 'datetime', sql: 'co.created_at' },
    modifiedAt: { type: 'datetime', sql: 'co.modified_at' },
  },
  properties: [
    'id',
    'name',
    'domain',
    'phone',
    'website',
    'industry',
    'size',
    'address1',
    'address2',
    'city',
    'state',
    'zipcode',
    'country',
    'description',
    'ownerId',
    'owner',
    'fields',
    'createdAt',
    'modifiedAt',
    'createdBy',
    'createdByUser',
    'modifiedBy',
    'modifiedByUser',
  ],
  dynamicFilterDoc:
    '`fields.<alias>` for each published company custom field, typed by the field: text types take eq, neq, in, nin, contains, startsWith, endsWith, isEmpty, isNotEmpty; number, date and datetime also gt, gte, lt, lte, between; boolean and select eq, neq, in, nin, isEmpty, isNotEmpty; multiselect contains (has the option), in (has any of), nin (has none of), isEmpty, isNotEmpty',
};
