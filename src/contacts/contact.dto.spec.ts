import { describe, expect, it } from '@jest/globals';
import { AppValidationPipe } from '../server/validation.pipe.js';
import { certainContactBody, CreateContactDto, UpdateContactDto } from './contact.dto.js';

const pipe = new AppValidationPipe();

/** What the validation pipe answers for the body: the DTO as JSON, or null when it refuses it. */
async function piped(body: Record<string, unknown>, create: boolean): Promise<string | null> {
  try {
    const dto: unknown = await pipe.transform(structuredClone(body), { type: 'body', metatype: create ? CreateContactDto : UpdateContactDto, data: '' });
    return JSON.stringify(dto);
  } catch {
    return null;
  }
}

const long = (n: number) => 'x'.repeat(n);
const valid = { name: 'Ada Lovelace', email: 'ada@example.com' };

/** Bodies valid and invalid, typical and at the edges of each rule. */
const BODIES: Record<string, unknown>[] = [
  valid,
  { ...valid, phone: '+14155550100', company: 'Acme', title: 'CTO', ownerId: 3, companyId: 7 },
  { ...valid, fields: { industry: 'software', lead_score: 42, newsletter: true, city: 'Oslo', signup_date: '2026-03-01' } },
  { ...valid, fields: { tags: ['a', 'b'], none: null } },
  { ...valid, fields: {} },
  { ...valid, fields: null, phone: null, company: null, title: null, ownerId: null, companyId: null },
  { name: long(255), email: 'a@b.co' },
  { name: long(256), email: 'a@b.co' },
  { name: '😀'.repeat(200), email: 'a@b.co' },
  { name: '', email: 'a@b.co' },
  { name: '   ', email: 'a@b.co' },
  { name: 'a\u0000b', email: 'a@b.co' },
  { name: 5, email: 'a@b.co' },
  { name: null, email: 'a@b.co' },
  { email: 'a@b.co' },
  { name: 'A' },
  { name: 'A', email: null },
  { name: 'A', email: 'not-an-email' },
  { name: 'A', email: 'a@b' },
  { name: 'A', email: 'a..b@example.com' },
  { name: 'A', email: '"quoted local"@example.com' },
  { name: 'A', email: 'Ada <ada@example.com>' },
  { name: 'A', email: `${long(64)}@example.com` },
  { name: 'A', email: `${long(65)}@example.com` },
  { name: 'A', email: `a@${long(63)}.${long(63)}.${long(63)}.${long(50)}.com` },
  { name: 'A', email: 'ünïcode@exämple.com' },
  { name: 'A', email: ' ada@example.com ' },
  { name: 'A', email: 'ADA@EXAMPLE.COM' },
  { ...valid, phone: long(40) },
  { ...valid, phone: long(41) },
  { ...valid, phone: 5 },
  { ...valid, company: long(256) },
  { ...valid, title: 'a\u0000' },
  { ...valid, ownerId: 0 },
  { ...valid, ownerId: 2147483647 },
  { ...valid, ownerId: 2147483648 },
  { ...valid, ownerId: 1.5 },
  { ...valid, ownerId: '3' },
  { ...valid, companyId: -1 },
  { ...valid, fields: [] },
  { ...valid, fields: 'x' },
  { ...valid, fields: { nested: { a: 1 } } },
  { ...valid, fields: { list: [{ a: 1 }] } },
  { ...valid, id: 5 },
  { ...valid, unknown: 1 },
  { ...valid, doNotContact: null },
];

describe('certainContactBody (the set-based batch path skips the validation pipe only for bodies the pipe accepts)', () => {
  for (const create of [true, false]) {
    it(`never accepts a body the pipe refuses, and answers what the pipe would (${create ? 'create' : 'update'})`, async () => {
      let accepted = 0;
      for (const body of BODIES) {
        const certain = certainContactBody(structuredClone(body), create as true);
        if (certain === null) continue;
        accepted++;
        const expected = await piped(body, create);
        expect({ body, pipe: expected }).toEqual({ body, pipe: JSON.stringify(certain) });
      }
      // The typical import and batch bodies do take the fast path.
      expect(accepted).toBeGreaterThanOrEqual(10);
    });
  }

  it('takes the typical bodies (the bench rows) and leaves unusual ones to the pipe', () => {
    expect(certainContactBody({ ...BODIES[2] }, true)).not.toBeNull();
    expect(certainContactBody({ email: 'ada@example.com' }, false)).not.toBeNull();
    expect(certainContactBody({ email: 'ada@example.com' }, true)).toBeNull(); // name is required: the pipe says so
    expect(certainContactBody({ ...valid, fields: { nested: { a: 1 } } }, true)).toBeNull();
    expect(certainContactBody({ name: null, email: 'ada@example.com' }, false)).toBeNull();
  });
});
