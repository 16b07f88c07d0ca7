import { describe, expect, it } from '@jest/globals';
import { hashPassword, PASSWORD_MIN_LENGTH, passwordProblem, verifyPassword } from './passwords.js';

describe('password rules', () => {
  const email = 'Alice.Smith@Example.com';

  it.each([
    ['short1234', /at least 12/],
    ['', /at least 12/],
    ['x'.repeat(257), /at most 256/],
    ['            ', /only spaces/],
    ['alice.smith@example.com', /email address/],
    ['my ALICE.SMITH@EXAMPLE.COM pw', /email address/],
    ['alice.smith-2026!', /name part/],
  ])('refuses %j', (password, message) => {
    expect(passwordProblem(password, email)).toMatch(message);
  });

  it.each(['correct horse battery', 'a'.repeat(PASSWORD_MIN_LENGTH), 'ünïcødé-pässwörd', 'x'.repeat(256)])('accepts %j', (password) => {
    expect(passwordProblem(password, email)).toBeNull();
  });

  it('counts characters, not UTF-16 units', () => {
    expect(passwordProblem('😀'.repeat(11), email)).toMatch(/at least 12/);
    expect(passwordProblem('😀'.repeat(12), email)).toBeNull();
  });

  it('a short local part is not held against the password', () => {
    expect(passwordProblem('bob is my uncle ok', 'bob@example.com')).toBeNull();
  });
});

describe('password hashing (scrypt)', () => {
  it('hashes with a fresh salt and the parameters in the string, and verifies only the right password', async () => {
    const a = await hashPassword('correct horse battery');
    const b = await hashPassword('correct horse battery');
    expect(a).toMatch(/^scrypt\$32768\$8\$1\$[A-Za-z0-9_-]{22}\$[A-Za-z0-9_-]{43}$/);
    expect(a).not.toBe(b);
    expect(a).not.toContain('correct');
    await expect(verifyPassword('correct horse battery', a)).resolves.toBe(true);
    await expect(verifyPassword('correct horse batterY', a)).resolves.toBe(false);
    await expect(verifyPassword('', a)).resolves.toBe(false);
  });

  it('never matches a malformed stored hash', async () => {
    for (const stored of ['', 'scrypt', 'bcrypt$1$2$3$4$5', 'scrypt$0$8$1$aaaa$bbbb', 'scrypt$99999999$8$1$aaaa$bbbb', 'scrypt$16384$8$1$aaaa$short']) {
      await expect(verifyPassword('anything at all', stored)).resolves.toBe(false);
    }
  });
});
