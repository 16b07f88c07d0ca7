import { describe, expect, it } from '@jest/globals';
import { MergeFieldError, parseTemplate, renderTemplate, templateAliases, templateSql } from './merge-fields.js';

const contact = { name: 'Ada', email: 'ada@example.com', phone: '+14155550100', company: null, title: '', fields: { tier: 'gold', score: 7 } };

describe('broadcast merge fields', () => {
  it('renders columns, custom fields and defaults', () => {
    const parts = parseTemplate(
      'Hi {{contact.name | "there"}} ({{ contact.company | "no company" }}), tier {{contact.fields.tier}} {{contact.fields.score}}{{contact.title|"-"}}',
    );
    expect(renderTemplate(parts, contact)).toBe('Hi Ada (no company), tier gold 7-');
    expect(renderTemplate(parts, { ...contact, name: '' })).toMatch(/^Hi there/);
    expect(templateAliases(parts)).toEqual(['tier', 'score']);
  });

  it('keeps single braces and escaped quotes in defaults', () => {
    expect(renderTemplate(parseTemplate('{a} {{contact.name | "say \\"hi\\""}} }'), { ...contact, name: null })).toBe('{a} say "hi" }');
    expect(parseTemplate('plain text')).toEqual([{ kind: 'text', text: 'plain text' }]);
  });

  it.each([
    ['Hi {{contact.nam}}', /unknown merge field \{\{contact\.nam\}\}/],
    ['Hi {{contact.name', /unclosed/],
    ['Hi contact.name}}', /without a matching/],
    ['Hi {{user.name}}', /malformed/],
    ['Hi {{contact.name | there}}', /malformed/],
    ['Hi {{contact.fields}}', /unknown merge field/],
    ['Hi {{contact.name.first}}', /unknown merge field/],
    ['Hi {{ {{contact.name}}', /inside the merge field/],
    ['{{}}', /malformed/],
  ])('refuses %s', (content, message) => {
    expect(() => parseTemplate(content)).toThrow(MergeFieldError);
    expect(() => parseTemplate(content)).toThrow(message);
  });

  it('builds SQL with every literal as a parameter', () => {
    const params: unknown[] = [7];
    const sql = templateSql(parseTemplate(`Hi {{contact.name | "x'); DROP"}} {{contact.fields.tier}}`), 'c', params);
    expect(sql).toBe(`concat($2::text, coalesce(nullif(c.name, ''), $3::text), $4::text, coalesce((c.fields ->> $5::text), ''))`);
    expect(params).toEqual([7, 'Hi ', "x'); DROP", ' ', 'tier']);
  });
});
