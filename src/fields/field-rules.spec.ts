import { describe, expect, it } from '@jest/globals';
import { applyCustomValues, type ContactFieldRule, normalizeProperties, parseDefaultValue, parseValue, type ValueRule } from './field-rules.js';

const rule = (type: ValueRule['type'], options: string[] | null = null): ValueRule => ({ type, options });

describe('normalizeProperties', () => {
  it('stores [] for non-option types given nothing, [] or {}', () => {
    for (const raw of [undefined, null, [], {}]) {
      expect(normalizeProperties('text', raw)).toEqual({ properties: [], errors: [] });
    }
  });

  it('refuses non-empty properties for non-option types', () => {
    expect(normalizeProperties('number', { scale: 2 }).errors).toEqual([{ field: 'properties', message: expect.stringContaining('empty') }]);
    expect(normalizeProperties('text', ['x']).errors).toHaveLength(1);
  });

  it('accepts a list of options for select and multiselect', () => {
    const list = [
      { label: 'Red', value: 'red' },
      { label: 'Blue', value: 'blue' },
    ];
    expect(normalizeProperties('multiselect', { list })).toEqual({ properties: { list }, errors: [] });
    expect(normalizeProperties('select', { list: [list[0]] })).toEqual({ properties: { list: [list[0]] }, errors: [] });
  });

  it.each([
    ['missing', undefined, 'properties.list'],
    ['an array', [], 'properties.list'],
    ['empty list', { list: [] }, 'properties.list'],
    ['not an array', { list: 'red' }, 'properties.list'],
    ['non-string value', { list: [{ label: 'One', value: 1 }] }, 'properties.list[0].value'],
    ['empty label', { list: [{ label: '', value: 'a' }] }, 'properties.list[0].label'],
    ['extra key in option', { list: [{ label: 'A', value: 'a', color: 'x' }] }, 'properties.list[0].color'],
    ['extra key in properties', { list: [{ label: 'A', value: 'a' }], other: 1 }, 'properties.other'],
    [
      'duplicate values',
      {
        list: [
          { label: 'A', value: 'a' },
          { label: 'B', value: 'a' },
        ],
      },
      'properties.list[1].value',
    ],
  ])('refuses select properties: %s', (_, raw, field) => {
    const r = normalizeProperties('select', raw);
    expect(r.errors.map((e) => e.field)).toContain(field);
    expect(r.properties).toEqual([]);
  });
});

describe('parseValue', () => {
  it.each([
    [rule('text'), 'hello', 'hello'],
    [rule('textarea'), 'x'.repeat(1000), 'x'.repeat(1000)],
    [rule('email'), ' ada@example.com ', 'ada@example.com'],
    [rule('url'), 'https://example.com/a?b=1', 'https://example.com/a?b=1'],
    [rule('tel'), '+44 20 7946 0958', '+442079460958'],
    [rule('tel'), '(415) 555-0100', '+14155550100'],
    [rule('number'), 42.5, 42.5],
    [rule('number'), -3, -3],
    [rule('boolean'), false, false],
    [rule('date'), '2024-02-29', '2024-02-29'],
    [rule('datetime'), '2026-11-21T11:15:00+01:00', '2026-11-21T10:15:00+00:00'],
    [rule('select', ['a', 'b']), 'b', 'b'],
    [rule('multiselect', ['a', 'b', 'c']), ['c', 'a', 'c'], ['c', 'a']],
    [rule('multiselect', ['a']), [], []],
    [rule('country'), 'de', 'DE'],
    [rule('locale'), 'en_us', 'en-US'],
    [rule('timezone'), 'Europe/Paris', 'Europe/Paris'],
  ])('accepts %j %j', (r, input, out) => {
    expect(parseValue(r, input)).toEqual({ ok: true, value: out });
  });

  it.each([
    [rule('text'), 5],
    [rule('text'), 'x'.repeat(256)],
    [rule('text'), 'nul\u0000'],
    [rule('email'), 'not-an-email'],
    [rule('url'), 'example.com'],
    [rule('url'), 'javascript:alert(1)'],
    [rule('tel'), 'call me'],
    [rule('number'), '42'],
    [rule('number'), null],
    [rule('boolean'), 'true'],
    [rule('boolean'), 1],
    [rule('date'), '2023-02-29'],
    [rule('date'), '2023-1-01'],
    [rule('datetime'), '2026-11-21T10:15:00'],
    [rule('select', ['a', 'b']), 'c'],
    [rule('select', ['a', 'b']), ['a']],
    [rule('multiselect', ['a', 'b']), 'a'],
    [rule('multiselect', ['a', 'b']), ['a', 'z']],
    [rule('country'), 'XY'],
    [rule('country'), 'USA'],
    [rule('locale'), 'not a locale!'],
    [rule('timezone'), 'Mars/Olympus'],
  ])('refuses %j %j', (r, input) => {
    expect(parseValue(r, input).ok).toBe(false);
  });
});

describe('parseDefaultValue', () => {
  it('reads defaults written as text', () => {
    expect(parseDefaultValue(rule('number'), '10.5')).toEqual({ ok: true, value: 10.5 });
    expect(parseDefaultValue(rule('boolean'), '1')).toEqual({ ok: true, value: true });
    expect(parseDefaultValue(rule('multiselect', ['a', 'b']), 'a|b')).toEqual({ ok: true, value: ['a', 'b'] });
    expect(parseDefaultValue(rule('select', ['a']), 'a')).toEqual({ ok: true, value: 'a' });
  });
  it('refuses defaults that are not values of the type', () => {
    expect(parseDefaultValue(rule('number'), 'ten').ok).toBe(false);
    expect(parseDefaultValue(rule('boolean'), 'yes').ok).toBe(false);
    expect(parseDefaultValue(rule('select', ['a']), 'b').ok).toBe(false);
    expect(parseDefaultValue(rule('email'), 'nobody').ok).toBe(false);
  });
});

describe('applyCustomValues', () => {
  const rules: ContactFieldRule[] = [
    { alias: 'city', type: 'text', options: null, isRequired: false, isUniqueIdentifier: false, defaultValue: null },
    { alias: 'score', type: 'number', options: null, isRequired: false, isUniqueIdentifier: false, defaultValue: '5' },
    { alias: 'tier', type: 'select', options: ['gold', 'silver'], isRequired: true, isUniqueIdentifier: false, defaultValue: null },
    { alias: 'crm_id', type: 'text', options: null, isRequired: false, isUniqueIdentifier: true, defaultValue: null },
  ];

  it('creates with defaults, and reports the unique-identifier values to check', () => {
    const r = applyCustomValues(rules, {}, { tier: 'gold', crm_id: 'X1' }, 'create');
    expect(r.errors).toEqual([]);
    expect(r.values).toEqual({ tier: 'gold', crm_id: 'X1', score: 5 });
    expect(r.changed.sort()).toEqual(['crm_id', 'score', 'tier']);
  });

  it('names every problem as fields.<alias>', () => {
    const r = applyCustomValues(rules, {}, { nope: 1, score: 'high', tier: 'bronze' }, 'create');
    expect(r.errors.map((e) => e.field).sort()).toEqual(['fields.nope', 'fields.score', 'fields.tier']);
  });

  it('requires required fields on create and replace', () => {
    expect(applyCustomValues(rules, {}, undefined, 'create').errors).toEqual([{ field: 'fields.tier', message: 'is required' }]);
    expect(applyCustomValues(rules, { tier: 'gold' }, {}, 'replace').errors).toEqual([{ field: 'fields.tier', message: 'is required' }]);
  });

  it('merges on patch, removes a key given null, and cannot clear a required field', () => {
    const current = { tier: 'gold', city: 'Paris', score: 1 };
    const r = applyCustomValues(rules, current, { city: null, score: 2 }, 'patch');
    expect(r.errors).toEqual([]);
    expect(r.values).toEqual({ tier: 'gold', score: 2 });
    expect(r.changed).toEqual(['score']);
    expect(applyCustomValues(rules, current, { tier: null }, 'patch').errors).toEqual([{ field: 'fields.tier', message: 'is required and cannot be cleared' }]);
    expect(applyCustomValues(rules, current, null, 'patch').errors.map((e) => e.field)).toEqual(['fields.tier']);
  });

  it('leaves a required field alone on a patch that does not touch it', () => {
    const r = applyCustomValues(rules, {}, { city: 'Rome' }, 'patch');
    expect(r.errors).toEqual([]);
    expect(r.values).toEqual({ city: 'Rome' });
  });

  it('replace keeps values of unpublished fields and resets omitted published ones', () => {
    const r = applyCustomValues(rules, { legacy: 'x', city: 'Paris', tier: 'gold' }, { tier: 'silver' }, 'replace');
    expect(r.errors).toEqual([]);
    expect(r.values).toEqual({ legacy: 'x', tier: 'silver', score: 5 });
  });

  it('refuses an unpublished alias on write', () => {
    expect(applyCustomValues(rules, { legacy: 'x' }, { legacy: 'y' }, 'patch').errors).toEqual([
      { field: 'fields.legacy', message: 'is not a published contact field' },
    ]);
  });
});
