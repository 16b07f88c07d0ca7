import { describe, expect, it } from '@jest/globals';
import { ALIAS_MAX_LENGTH, aliasCandidate, aliasFrom, firstFreeAlias } from './alias.js';

describe('aliasFrom', () => {
  it.each([
    ['First Name', 'first_name'],
    ['  Lead   score!! ', 'lead_score'],
    ['Crème brûlée', 'creme_brulee'],
    ['Straße', 'strasse'],
    ['e-mail (work)', 'e_mail_work'],
    ['ABC123', 'abc123'],
    ['___', 'item'],
    ['日本語', 'item'],
  ])('%s → %s', (label, alias) => {
    expect(aliasFrom(label)).toBe(alias);
  });

  it('uses the given separator and fallback', () => {
    expect(aliasFrom('Spring Promo 2026', '-')).toBe('spring-promo-2026');
    expect(aliasFrom('!!!', '-', 'category')).toBe('category');
  });

  it('never exceeds the length limit and never ends with a separator', () => {
    const alias = aliasFrom('word '.repeat(40));
    expect(alias.length).toBeLessThanOrEqual(ALIAS_MAX_LENGTH);
    expect(alias).toMatch(/^[a-z0-9_]+$/);
    expect(alias.endsWith('_')).toBe(false);
  });
});

describe('aliasCandidate / firstFreeAlias', () => {
  it('suffixes from 2 on', () => {
    expect(aliasCandidate('city', 1)).toBe('city');
    expect(aliasCandidate('city', 2)).toBe('city_2');
    expect(aliasCandidate('news', 3, '-')).toBe('news-3');
  });

  it('keeps suffixed candidates within the limit', () => {
    const base = 'a'.repeat(ALIAS_MAX_LENGTH);
    expect(aliasCandidate(base, 12)).toHaveLength(ALIAS_MAX_LENGTH);
    expect(aliasCandidate(base, 12).endsWith('_12')).toBe(true);
  });

  it('finds the first free alias', () => {
    expect(firstFreeAlias('city', new Set())).toBe('city');
    expect(firstFreeAlias('city', new Set(['city', 'city_2', 'city_4']))).toBe('city_3');
  });
});
