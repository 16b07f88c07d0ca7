import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { AppError } from '../common/errors.js';
import { compileFilter, type FilterRegistry, relativeDate } from './filter-sql.js';
import { type FilterNode, parseFilterText, readJsonFilter, toQueryString } from './filter-syntax.js';

const registry: FilterRegistry = {
  id: { type: 'id', sql: 'c.id' },
  name: { type: 'string', sql: 'c.name' },
  score: { type: 'number', sql: 'c.score' },
  createdAt: { type: 'datetime', sql: 'c.created_at' },
  day: { type: 'date', sql: 'c.day' },
  active: { type: 'boolean', sql: 'c.active' },
  status: { type: 'enum', sql: 'c.status', values: ['open', 'won'] },
  'campaign.id': {
    type: 'membership',
    sql: '',
    membership: { table: 'campaign_members', recordColumn: 'contact_id', recordId: 'c.id', setColumn: 'campaign_id' },
  },
  'fields.plan': { type: 'json-scalar', sql: 'c.fields', values: ['free', 'pro'], json: { key: 'plan', valueType: 'select' } },
  'fields.note': { type: 'json-text', sql: 'c.fields', json: { key: 'note', valueType: 'string' } },
};

const NOW = new Date('2026-05-10T12:00:00Z');
const compile = (raw: unknown) => compileFilter(raw, registry, NOW).compiled;

function refusal(raw: unknown): string {
  try {
    compileFilter(raw, registry, NOW);
  } catch (e) {
    expect(e).toBeInstanceOf(AppError);
    expect((e as AppError).code).toBe('validation_failed');
    return `${(e as AppError).message} ${JSON.stringify((e as AppError).details)}`;
  }
  throw new Error(`expected ${JSON.stringify(raw)} to be refused`);
}

describe('parseFilterText', () => {
  it.each<[string, FilterNode]>([
    ['name[eq]:Ada', { field: 'name', op: 'eq', value: 'Ada' }],
    ['name[eq]: Ada ', { field: 'name', op: 'eq', value: 'Ada' }],
    ['name[isEmpty]', { field: 'name', op: 'isEmpty' }],
    ['name[in]:[a,"b,c",""]', { field: 'name', op: 'in', value: ['a', 'b,c', ''] }],
    ['name[eq]:"say \\"hi\\" \\\\ (x)"', { field: 'name', op: 'eq', value: 'say "hi" \\ (x)' }],
    [
      'a[eq]:1,b[eq]:2',
      {
        and: [
          { field: 'a', op: 'eq', value: '1' },
          { field: 'b', op: 'eq', value: '2' },
        ],
      },
    ],
    ['or(a[eq]:1,not(b[gt]:2))', { or: [{ field: 'a', op: 'eq', value: '1' }, { not: { field: 'b', op: 'gt', value: '2' } }] }],
    ['{"field":"a","op":"eq","value":3}', { field: 'a', op: 'eq', value: 3 }],
    ['created[gte]:now-7d', { field: 'created', op: 'gte', value: 'now-7d' }],
  ])('%s', (text, node) => {
    expect(parseFilterText(text)).toEqual(node);
  });

  it.each([
    '',
    'name',
    'name[eq',
    'name[eq]:"x',
    'and(',
    'and()',
    'or(a[eq]:1',
    'name[eq]:a)',
    'name[eq]:a b"c',
    'not(a[eq]:1,b[eq]:2)',
    '{"and":',
    'x[eq]:"\\n"',
  ])('refuses %j as a 400', (text) => {
    expect(refusal(text)).toMatch(/Invalid filter/);
  });
});

describe('compileFilter', () => {
  it('binds every value and builds SQL from the registry only', () => {
    const c = compile('and(name[contains]:"50%_off",score[between]:[1,2.5],status[in]:[open,won],active[eq]:true)');
    expect(c.sql).toBe('((lower(c.name) LIKE :__flt0) AND (c.score BETWEEN :__flt1 AND :__flt2) AND (c.status = ANY(:__flt3)) AND (c.active = :__flt4))');
    expect(c.params).toEqual({ __flt0: '%50\\%\\_off%', __flt1: 1, __flt2: 2.5, __flt3: ['open', 'won'], __flt4: true });
  });

  it('ids compare like every integer: gt, gte, lt, lte and between, with the id range checked', () => {
    const c = compile('and(id[gt]:5,id[lte]:2147483647,id[between]:[10,20])');
    expect(c.sql).toBe('((c.id > :__flt0) AND (c.id <= :__flt1) AND (c.id BETWEEN :__flt2 AND :__flt3))');
    expect(c.params).toEqual({ __flt0: 5, __flt1: 2147483647, __flt2: 10, __flt3: 20 });
    expect(compile({ field: 'id', op: 'gte', value: 3 }).sql).toBe('(c.id >= :__flt0)');
    expect(compile('id[lt]:9').sql).toBe('(c.id < :__flt0)');
    expect(refusal('id[gt]:0')).toMatch(/out of range/);
    expect(refusal('id[contains]:1')).toMatch(/allowed: eq, neq, gt, gte, lt, lte, between, in, nin, isEmpty, isNotEmpty/);
  });

  it('a string field with a textIndex also tests it with a substring match (which the column match implies)', () => {
    const withIndex: FilterRegistry = { email: { type: 'string', sql: 'c.email', textIndex: 'c.search_text' } };
    const c = compileFilter('or(email[startsWith]:Ada_,email[endsWith]:"@x.test")', withIndex, NOW).compiled;
    expect(c.sql).toBe('((c.search_text LIKE :__flt0 AND lower(c.email) LIKE :__flt1) OR (c.search_text LIKE :__flt2 AND lower(c.email) LIKE :__flt3))');
    expect(c.params).toEqual({ __flt0: '%ada\\_%', __flt1: 'ada\\_%', __flt2: '%@x.test%', __flt3: '%@x.test' });
    expect(compileFilter('email[eq]:a@x.test', withIndex, NOW).compiled.sql).toBe('(c.email = :__flt0)');
  });

  it('compiles custom values to containment (GIN-served) and membership to EXISTS', () => {
    const c = compile({
      or: [
        { field: 'fields.plan', op: 'in', value: ['free', 'pro'] },
        { field: 'campaign.id', op: 'eq', value: 7 },
      ],
    });
    expect(c.sql).toBe(
      '(((c.fields @> CAST(:__flt0 AS jsonb)) OR (c.fields @> CAST(:__flt1 AS jsonb))) OR (EXISTS (SELECT 1 FROM campaign_members m WHERE m.contact_id = c.id AND m.campaign_id = :__flt2)))',
    );
    expect(c.params).toEqual({ __flt0: '{"plan":"free"}', __flt1: '{"plan":"pro"}', __flt2: 7 });
  });

  it('not() is the exact complement even for empty values', () => {
    expect(compile('not(name[eq]:x)').sql).toBe('(NOT COALESCE((c.name = :__flt0), FALSE))');
  });

  it('resolves relative dates at the given moment', () => {
    expect(compile('createdAt[gte]:now-7d').params.__flt0).toEqual(new Date('2026-05-03T12:00:00Z'));
    expect(compile('day[lt]:now+1M').params.__flt0).toBe('2026-06-10');
    expect(relativeDate('now+2h', NOW)).toEqual(new Date('2026-05-10T14:00:00Z'));
    expect(relativeDate('now-1y', NOW)).toEqual(new Date('2025-05-10T12:00:00Z'));
    expect(relativeDate('now-7x', NOW)).toBeNull();
  });

  it.each<[unknown, RegExp]>([
    ['nope[eq]:1', /not a filterable field; allowed: id, name, score/],
    ['name[like]:x', /allowed: eq, neq/],
    ['active[contains]:x', /not an operator of active/],
    ['score[eq]:abc', /decimal number/],
    ['id[eq]:0', /out of range/],
    ['status[eq]:lost', /one of: open, won/],
    ['createdAt[gt]:yesterday', /ISO 8601/],
    ['day[eq]:2026-02-30', /calendar day/],
    ['fields.plan[eq]:gold', /one of: free, pro/],
    ['name[in]:x', /takes a list/],
    ['name[eq]:[x]', /one value/],
    ['name[isEmpty]:x', /takes no value/],
    [{ field: 'name', op: 'eq', value: { x: 1 } }, /must be a string, number/],
    [{ not: [] }, /each node must be an object/],
    [{ and: [{ field: 'name', op: 'eq', value: 'a' }], or: [] }, /no other property/],
  ])('%j is a 400: %s', (raw, pattern) => {
    expect(refusal(raw)).toMatch(pattern);
  });

  it('enforces depth, condition and list limits', () => {
    const nest = (d: number): string => (d === 0 ? 'name[eq]:a' : `not(${nest(d - 1)})`);
    expect(() => compile(nest(4))).not.toThrow();
    expect(refusal(nest(5))).toMatch(/deeper than 4/);
    const or = (n: number) => `or(${Array.from({ length: n }, () => 'name[eq]:a').join(',')})`;
    expect(() => compile(or(50))).not.toThrow();
    expect(refusal(`and(${or(26)},${or(25)})`)).toMatch(/more than 50 conditions/);
    expect(refusal({ field: 'name', op: 'in', value: Array.from({ length: 1001 }, () => 'a') })).toMatch(/1000/);
  });
});

// ---- properties

const fieldArb = fc.constantFrom('name', 'score', 'status', 'fields.plan', 'x.y_z');
const opArb = fc.constantFrom('eq', 'neq', 'in', 'between', 'contains', 'isEmpty', 'gte');
const scalarArb = fc.oneof(fc.string({ maxLength: 12 }), fc.constantFrom('a,b', '(x)', '"q"', '\\', ' pad ', '[', ']', ':', 'now-7d'));
const condArb: fc.Arbitrary<FilterNode> = fc
  .tuple(fieldArb, opArb, fc.oneof(scalarArb, fc.array(scalarArb, { minLength: 1, maxLength: 4 })))
  .map(([field, op, value]) => (op === 'isEmpty' ? { field, op } : { field, op, value }));
const treeArb: fc.Arbitrary<FilterNode> = fc.letrec<{ node: FilterNode }>((tie) => ({
  node: fc.oneof(
    { depthSize: 'small', withCrossShrink: true, maxDepth: 3 },
    condArb,
    fc.array(tie('node'), { minLength: 1, maxLength: 3 }).map((and) => ({ and })),
    fc.array(tie('node'), { minLength: 1, maxLength: 3 }).map((or) => ({ or })),
    tie('node').map((not) => ({ not })),
  ),
})).node;

describe('filter properties', () => {
  it('a tree survives JSON → query string → tree', () => {
    fc.assert(
      fc.property(treeArb, (tree) => {
        expect(parseFilterText(toQueryString(tree))).toEqual(tree);
        expect(readJsonFilter(JSON.parse(JSON.stringify(tree)))).toEqual(tree);
      }),
      { numRuns: 500 },
    );
  });

  it('any text either compiles with every value bound or is a 400; never another error', () => {
    const pieces = fc.constantFrom(
      'and(',
      'or(',
      'not(',
      ')',
      ',',
      '[',
      ']',
      ':',
      '"',
      '\\',
      'name',
      'fields.plan',
      'score',
      '[eq]',
      '[in]',
      "'",
      ';',
      '--',
      'DROP TABLE',
    );
    const textArb = fc.oneof(
      fc.string({ maxLength: 60 }),
      fc.array(pieces, { maxLength: 20 }).map((p) => p.join('')),
      fc.string({ unit: 'grapheme', maxLength: 30 }),
    );
    fc.assert(
      fc.property(textArb, (text) => {
        let compiled;
        try {
          compiled = compileFilter(text, registry, NOW).compiled;
        } catch (e) {
          expect(e).toBeInstanceOf(AppError);
          expect((e as AppError).status).toBe(400);
          return;
        }
        // SQL text holds only registry expressions, operators and parameter names.
        const stripped = compiled.sql.replace(/:__flt\d+/g, '').replace(/'(plan|note)'/g, '');
        expect(stripped).not.toMatch(/['";]|--/);
      }),
      { numRuns: 1000 },
    );
  });

  it('hostile values are parameters, never SQL text', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 50 }), fc.constantFrom('eq', 'contains', 'startsWith', 'endsWith', 'gt'), (value, op) => {
        const { sql, params } = compile({ field: 'name', op, value });
        expect(sql).toMatch(/^\((lower\(c\.name\) LIKE|c\.name >?=?) :__flt0\)$/);
        expect(Object.keys(params)).toEqual(['__flt0']);
      }),
      { numRuns: 500 },
    );
  });
});
