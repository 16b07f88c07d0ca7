import { describe, expect, it } from '@jest/globals';
import { AppError } from '../common/errors.js';
import { parseListQuery } from './list-query.js';
import { AUDIT_PROPERTIES, auditFields, changedExpression, defineList, type ListSpec } from './list-spec.js';
import { likePattern } from './list-sql.js';
import { listQueryParameters } from './list.openapi.js';

const spec: ListSpec = {
  name: 'things',
  sortable: { id: 't.id', name: 't.name' },
  searchExpression: 'sf_text(t.name)',
  filters: {
    status: { type: 'string', column: 't.status', values: ['active', 'inactive'] },
    isPublished: { type: 'boolean', column: 't.is_published' },
    campaignId: { type: 'int', column: 't.campaign_id' },
  },
};

function fails(query: Record<string, unknown>): AppError {
  try {
    parseListQuery(query, spec);
  } catch (e) {
    return e as AppError;
  }
  throw new Error(`expected ${JSON.stringify(query)} to be refused`);
}

describe('parseListQuery', () => {
  it('applies the defaults: page 1, limit 30, by id ascending', () => {
    expect(parseListQuery({}, spec)).toEqual({
      page: 1,
      limit: 30,
      offset: 0,
      orderBy: 'id',
      orderByDir: 'ASC',
      search: null,
      filters: {},
      modifiedSince: null,
    });
  });

  it('reads page, limit, order and search', () => {
    const q = parseListQuery({ page: '3', limit: '200', orderBy: 'name', orderByDir: 'DeSc', search: '  ada ' }, spec);
    expect(q).toMatchObject({ page: 3, limit: 200, offset: 400, orderBy: 'name', orderByDir: 'DESC', search: 'ada' });
  });

  it.each([
    [{ limit: '0' }, 'limit'],
    [{ limit: '201' }, 'limit'],
    [{ limit: '-1' }, 'limit'],
    [{ limit: '1.5' }, 'limit'],
    [{ page: '0' }, 'page'],
    [{ page: 'abc' }, 'page'],
    [{ orderBy: 'password' }, 'orderBy'],
    [{ orderBy: 'name; DROP TABLE x' }, 'orderBy'],
    [{ orderByDir: 'sideways' }, 'orderByDir'],
    [{ status: 'deleted' }, 'status'],
    [{ isPublished: 'yes' }, 'isPublished'],
    [{ campaignId: '1e3' }, 'campaignId'],
    [{ page: ['1', '2'] }, 'page'],
    [{ where: '1=1' }, 'where'],
  ])('refuses %j naming %s', (query, field) => {
    const err = fails(query);
    expect(err.code).toBe('validation_failed');
    expect(err.details?.map((d) => d.field)).toContain(field);
  });

  it('reports every problem at once', () => {
    expect(fails({ limit: '0', page: '0', orderBy: 'x' }).details).toHaveLength(3);
  });

  it('parses booleans and ints in filters', () => {
    expect(parseListQuery({ isPublished: '1', campaignId: '42', status: 'active' }, spec).filters).toEqual({
      isPublished: true,
      campaignId: 42,
      status: 'active',
    });
    expect(parseListQuery({ isPublished: 'FALSE' }, spec).filters).toEqual({ isPublished: false });
    expect(parseListQuery({ campaignId: '2147483647' }, spec).filters).toEqual({ campaignId: 2147483647 });
  });

  // The message says "positive", so 0 is refused like any other non-id.
  it.each(['0', '00', '-1', '2147483648', '1.5', ' 1', '1e3', '0x10', 'abc'])('refuses the integer filter %j', (v) => {
    const e = fails({ campaignId: v });
    expect(e.details).toEqual([{ field: 'campaignId', message: expect.stringContaining('positive whole number') }]);
  });
});

describe('likePattern', () => {
  it('escapes wildcards so search is a literal substring', () => {
    expect(likePattern('50%_off\\')).toBe('%50\\%\\_off\\\\%');
    expect(likePattern('AdA')).toBe('%ada%');
  });
});

describe('modifiedSince (incremental sync)', () => {
  const audited: ListSpec = { name: 'audited', sortable: { id: 'a.id', createdAt: 'a.created_at', modifiedAt: 'a.modified_at' } };

  it('compares with the last change time: modifiedAt, or the creation time of a record never changed', () => {
    expect(changedExpression(audited)).toBe('COALESCE(a.modified_at, a.created_at)');
    expect(changedExpression({ name: 'f', sortable: { id: 'f.id', dateAdded: 'f.created_at', dateModified: 'f.modified_at' } })).toBe(
      'COALESCE(f.modified_at, f.created_at)',
    );
    expect(changedExpression({ name: 'x', sortable: { id: 'x.id' }, changedExpression: 'x.changed' })).toBe('x.changed');
  });

  it('parses a date-time with an offset and refuses anything else', () => {
    expect(parseListQuery({ modifiedSince: '2026-01-31T12:00:00+02:00' }, audited).modifiedSince).toEqual(new Date('2026-01-31T10:00:00Z'));
    for (const bad of ['yesterday', '2026-01-31', '2026-01-31T12:00:00', '2026-02-30T00:00:00Z']) {
      let error: AppError | null = null;
      try {
        parseListQuery({ modifiedSince: bad }, audited);
      } catch (e) {
        error = e as AppError;
      }
      expect(error?.details?.[0]?.field).toBe('modifiedSince');
    }
  });

  it('is documented and accepted only on lists with audit timestamps', () => {
    expect(listQueryParameters(audited).map((p) => p.name)).toContain('modifiedSince');
    expect(listQueryParameters(spec).map((p) => p.name)).not.toContain('modifiedSince');
    expect(fails({ modifiedSince: '2026-01-31T12:00:00Z' }).details?.[0]?.field).toBe('modifiedSince');
  });
});

describe('defineList', () => {
  const fields = {
    id: { type: 'id', sql: 't.id' },
    name: { type: 'string', sql: 't.name' },
    'owner.id': { type: 'id', sql: 't.owner_id' },
    ...auditFields('t'),
  } as const;

  it("sorts by every field but the dotted names, with the field's SQL, and answers them then the audit properties", () => {
    const list = defineList({ name: 'things', fields });
    expect(list.sortable).toEqual({ id: 't.id', name: 't.name', createdAt: 't.created_at', modifiedAt: 't.modified_at' });
    expect(Object.keys(list.sortable)).toEqual(['id', 'name', 'createdAt', 'modifiedAt']);
    expect(list.filterable).toBe(fields);
    expect(list.properties).toEqual(['id', 'name', 'createdAt', 'modifiedAt', ...AUDIT_PROPERTIES]);
    expect(changedExpression(list)).toBe('COALESCE(t.modified_at, t.created_at)');
  });

  it('keeps a stated sort order and property list', () => {
    const list = defineList({ name: 'things', fields, sortable: ['name', 'id'], properties: ['id', 'name', 'extra'] });
    expect(Object.keys(list.sortable)).toEqual(['name', 'id']);
    expect(list.properties).toEqual(['id', 'name', 'extra']);
  });

  it('refuses a sortable name that is not a field', () => {
    expect(() => defineList({ name: 'things', fields, sortable: ['nope'] })).toThrow('list things: sortable nope is not one of its fields');
  });
});
