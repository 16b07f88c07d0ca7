import { describe, expect, it } from '@jest/globals';
import { AppError } from '../common/errors.js';
import { columnOf, csvCell, csvLine, detectDelimiter, exportColumns, neutraliseFormula, planColumns, rowRecord, targetProblem } from './import.rules.js';

const FIELDS = [
  { alias: 'score', type: 'number' },
  { alias: 'vip', type: 'boolean' },
  { alias: 'tags', type: 'multiselect' },
];

function problems(f: () => unknown): string[] {
  try {
    f();
  } catch (e) {
    if (e instanceof AppError) return (e.details ?? []).map((d) => `${d.field}: ${d.message}`);
    throw e;
  }
  throw new Error('expected an error');
}

describe('import rules', () => {
  it('detects the delimiter from the header line, ignoring quoted text', () => {
    expect(detectDelimiter('name,email,title')).toBe(',');
    expect(detectDelimiter('name;email;title')).toBe(';');
    expect(detectDelimiter('name\temail\ttitle')).toBe('\t');
    expect(detectDelimiter('"a;b;c",email')).toBe(',');
    expect(detectDelimiter('single')).toBe(',');
  });

  it('plans columns: mapped, unmapped by their own name, ignored; the id column only when records are named by id', () => {
    const plans = planColumns(
      ['Name', 'email', 'Score', 'id', 'createdAt', 'Note'],
      { Name: 'name', Score: 'fields.score', Note: 'ignore' },
      'contacts',
      FIELDS,
      'email',
    );
    expect(plans.map((p) => p.target)).toEqual([
      { kind: 'property', name: 'name', type: 'string' },
      { kind: 'property', name: 'email', type: 'string' },
      { kind: 'field', alias: 'score', type: 'number' },
      null,
      null,
      null,
    ]);
    expect(planColumns(['id', 'name'], {}, 'contacts', FIELDS, 'id')[0].target).toEqual({ kind: 'id' });
  });

  it('a contact import takes points (set through the point ledger), read as a whole number; other objects do not, and pointGroups never', () => {
    const plans = planColumns(['email', 'points', 'pointGroups'], {}, 'contacts', FIELDS, 'email');
    expect(plans.map((p) => p.target)).toEqual([
      { kind: 'property', name: 'email', type: 'string' },
      { kind: 'property', name: 'points', type: 'integer' },
      null,
    ]);
    expect(rowRecord(['a@x.test', '42', '[]'], plans, 'ignore', true)).toEqual({ email: 'a@x.test', points: 42 });
    expect(rowRecord(['a@x.test', 'many', ''], plans, 'ignore', true)).toEqual({ email: 'a@x.test', points: 'many' });
    expect(columnOf('points', plans)).toBe('points');
    expect(targetProblem('points', 'contacts', FIELDS)).toBeNull();
    expect(targetProblem('points', 'companies', [])).toMatch(/is not a writable property of companies/);
    expect(targetProblem('points', 'deals', [])).toMatch(/is not a writable property of deals/);
  });

  it('refuses a mapping naming a missing column, an unknown target, two columns on one property, or nothing mapped', () => {
    expect(problems(() => planColumns(['name'], { Mail: 'email' }, 'contacts', FIELDS, 'email'))).toEqual([
      'mapping.Mail: names a column the file does not have',
    ]);
    expect(problems(() => planColumns(['name', 'x'], { x: 'password' }, 'contacts', FIELDS, 'email'))[0]).toMatch(
      /^mapping.x: "password" is not a writable property/,
    );
    expect(problems(() => planColumns(['name', 'x'], { x: 'fields.nope' }, 'contacts', FIELDS, 'email'))[0]).toMatch(/^mapping.x:/);
    expect(problems(() => planColumns(['name', 'Full name'], { 'Full name': 'name' }, 'contacts', FIELDS, 'email'))).toEqual([
      'mapping.Full name: maps to name as column "name" does',
    ]);
    expect(problems(() => planColumns(['a', 'b'], {}, 'contacts', FIELDS, 'email'))).toEqual(['mapping: maps no column']);
    // Deals have no custom fields.
    expect(problems(() => planColumns(['title', 's'], { s: 'fields.score' }, 'deals', FIELDS, 'id'))[0]).toMatch(/^mapping.s:/);
  });

  it('reads a row: typed cells, empty cells ignored or cleared, all-empty rows skipped (null)', () => {
    const plans = planColumns(
      ['name', 'companyId', 'score', 'vip', 'tags', 'x'],
      { score: 'fields.score', vip: 'fields.vip', tags: 'fields.tags' },
      'contacts',
      FIELDS,
      'email',
    );
    expect(rowRecord(['Ann', '12', '3.5', 'yes', 'a| b|', 'ignored'], plans, 'ignore', true)).toEqual({
      name: 'Ann',
      companyId: 12,
      fields: { score: 3.5, vip: true, tags: ['a', 'b'] },
    });
    // A value that does not parse stays text, for the route's own 400.
    expect(rowRecord(['Ann', 'twelve', 'x', 'maybe', '', ''], plans, 'ignore', true)).toEqual({
      name: 'Ann',
      companyId: 'twelve',
      fields: { score: 'x', vip: 'maybe' },
    });
    expect(rowRecord(['Ann', '', '', '', '', ''], plans, 'clear', true)).toEqual({
      name: 'Ann',
      companyId: null,
      fields: { score: null, vip: null, tags: null },
    });
    expect(rowRecord(['', '', '', '', '', 'only ignored'], plans, 'ignore', true)).toBeNull();
    // JSON rows keep their types.
    expect(rowRecord(['Ann', 7, 2, false, ['a'], null], plans, 'ignore', false)).toEqual({
      name: 'Ann',
      companyId: 7,
      fields: { score: 2, vip: false, tags: ['a'] },
    });
  });

  it("names the file's column of an error's field", () => {
    const plans = planColumns(['E-mail', 'Score'], { 'E-mail': 'email', Score: 'fields.score' }, 'contacts', FIELDS, 'email');
    expect(columnOf('email', plans)).toBe('E-mail');
    expect(columnOf('fields.score', plans)).toBe('Score');
    expect(columnOf('name', plans)).toBeNull();
    expect(columnOf(undefined, plans)).toBeNull();
  });

  it('export columns, cells and lines', () => {
    expect(exportColumns(['id', 'name'], ['score'], undefined)).toEqual(['id', 'name', 'fields.score']);
    expect(exportColumns(['id', 'name'], ['score'], ['fields.score', 'id'])).toEqual(['id', 'fields.score']);
    expect(problems(() => exportColumns(['id'], [], ['secret']))).toEqual(['fields: secret is not an exported property']);
    const record = { id: 1, name: 'A, "B"', fields: { tags: ['a', 'b'], vip: false }, owner: { id: 2 }, none: null };
    expect(csvCell(record, 'fields.tags')).toBe('a|b');
    expect(csvCell(record, 'fields.vip')).toBe('false');
    expect(csvCell(record, 'owner')).toBe('{"id":2}');
    expect(csvCell(record, 'none')).toBe('');
    expect(csvLine(['1', 'A, "B"', 'two\nlines', ''])).toBe('1,"A, ""B""","two\nlines",\n');
  });

  it("never takes a name of Object.prototype for a property: mapped to, as a column's own name, or as a cell", () => {
    for (const name of ['constructor', 'toString', 'hasOwnProperty', '__proto__', 'valueOf']) {
      expect(targetProblem(name, 'contacts', FIELDS)).toMatch(/is not a writable property of contacts/);
      expect(problems(() => planColumns(['name', 'x'], { x: name }, 'contacts', FIELDS, 'email'))[0]).toMatch(/^mapping.x: ".+" is not a writable property/);
      // A file whose only column is such a name maps nothing.
      expect(problems(() => planColumns([name], {}, 'contacts', FIELDS, 'email'))).toEqual(['mapping: maps no column']);
      expect(problems(() => planColumns([name], {}, 'deals', FIELDS, 'id'))).toEqual(['mapping: maps no column']);
      expect(targetProblem(`fields.${name}`, 'contacts', FIELDS)).not.toBeNull();
      expect(csvCell({ id: 1, fields: {} }, name)).toBe('');
      expect(csvCell({ id: 1, fields: {} }, `fields.${name}`)).toBe('');
    }
    expect(targetProblem('name', 'contacts', FIELDS)).toBeNull();
    expect(targetProblem('fields.score', 'contacts', FIELDS)).toBeNull();
    expect(targetProblem('ignore', 'deals', [])).toBeNull();
    expect(targetProblem('id', 'deals', [])).toBeNull();
  });

  it('neutralises cells a spreadsheet would run as formulas, unless asked not to; numbers stay numbers', () => {
    for (const bad of ['=1+1', '=HYPERLINK("http://x.test","y")', '+cmd|/C calc!A0', '-2+3', '@SUM(A1)', '\t=1', '\r=1', '-', '+', '=']) {
      expect(neutraliseFormula(bad)).toBe(`'${bad}`);
    }
    for (const fine of ['', 'Ann', ' =1', "'=1", '1=1', '-3.5', '+14155550100', '42', '1e3', '-.5', 'a@b.test']) {
      expect(neutraliseFormula(fine)).toBe(fine);
    }
    const record = { id: 1, name: '=cmd()', title: '@x', value: -3, phone: '+14155550100', fields: { tags: ['-a', 'b'] } };
    expect(csvCell(record, 'name')).toBe("'=cmd()");
    expect(csvCell(record, 'title')).toBe("'@x");
    expect(csvCell(record, 'value')).toBe('-3');
    expect(csvCell(record, 'phone')).toBe('+14155550100');
    expect(csvCell(record, 'fields.tags')).toBe("'-a|b");
    expect(csvCell(record, 'name', false)).toBe('=cmd()');
    expect(csvCell(record, 'fields.tags', false)).toBe('-a|b');
  });
});
