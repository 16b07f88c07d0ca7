import { describe, expect, it } from '@jest/globals';
import { needsTouch, parseCookies, serializeCookie, sessionExpiry, sessionState, signInWait, SIGN_IN_MAX_WAIT_MS, SIGN_IN_WINDOW_MS } from './session.rules.js';

const T0 = Date.UTC(2026, 10, 23, 12, 0, 0);
const at = (ms: number) => new Date(T0 + ms);

describe('session lifetime', () => {
  const IDLE = 1800;
  const session = { createdAt: at(0), lastSeenAt: at(0), expiresAt: sessionExpiry(T0, 43200), revokedAt: null };

  it('is active while used within the idle lifetime and before the absolute expiry', () => {
    expect(sessionState(session, T0 + 1000, IDLE)).toBe('active');
    expect(sessionState({ ...session, lastSeenAt: at(40_000_000) }, T0 + 40_000_000 + IDLE * 1000 - 1, IDLE)).toBe('active');
  });

  it('ends after the idle lifetime without use', () => {
    expect(sessionState(session, T0 + IDLE * 1000 - 1, IDLE)).toBe('active');
    expect(sessionState(session, T0 + IDLE * 1000, IDLE)).toBe('idle');
  });

  it('ends at the absolute expiry however recently it was used', () => {
    const busy = { ...session, lastSeenAt: at(43_199_000) };
    expect(sessionState(busy, T0 + 43_199_999, IDLE)).toBe('active');
    expect(sessionState(busy, T0 + 43_200_000, IDLE)).toBe('expired');
  });

  it('a revoked session is over at once', () => {
    expect(sessionState({ ...session, revokedAt: at(1) }, T0 + 2, IDLE)).toBe('revoked');
  });

  it('records use at most once a minute, and more often for short idle lifetimes', () => {
    expect(needsTouch(at(0), T0 + 59_999, IDLE)).toBe(false);
    expect(needsTouch(at(0), T0 + 60_000, IDLE)).toBe(true);
    expect(needsTouch(at(0), T0 + 15_000, 60)).toBe(true);
    expect(needsTouch(at(0), T0 + 14_999, 60)).toBe(false);
  });
});

describe('sign-in throttle', () => {
  const FREE = 5;
  const count = (failures: number, lastMs: number, firstMs = 0) => ({ failures, firstAt: at(firstMs), lastAt: at(lastMs) });

  it('lets the free attempts through', () => {
    expect(signInWait(null, FREE, T0)).toBe(0);
    expect(signInWait(count(4, 0), FREE, T0)).toBe(0);
  });

  it('then makes each attempt wait 1, 2, 4 ... seconds after the last failure', () => {
    expect(signInWait(count(5, 0), FREE, T0)).toBe(1000);
    expect(signInWait(count(5, 0), FREE, T0 + 400)).toBe(600);
    expect(signInWait(count(5, 0), FREE, T0 + 1000)).toBe(0);
    expect(signInWait(count(6, 0), FREE, T0)).toBe(2000);
    expect(signInWait(count(8, 0), FREE, T0)).toBe(8000);
  });

  it('never longer than 15 minutes, and forgets failures after the window', () => {
    expect(signInWait(count(500, 0), FREE, T0)).toBe(SIGN_IN_MAX_WAIT_MS);
    expect(signInWait(count(500, SIGN_IN_WINDOW_MS - 1), FREE, T0 + SIGN_IN_WINDOW_MS)).toBe(0);
  });
});

describe('cookies', () => {
  it('are HttpOnly, SameSite=Lax, scoped to /account, and Secure only for https', () => {
    expect(serializeCookie('sf_session', 'abc', { secure: false })).toBe('sf_session=abc; Path=/account; HttpOnly; SameSite=Lax');
    expect(serializeCookie('sf_session', 'abc', { secure: true, maxAgeSeconds: 0 })).toBe(
      'sf_session=abc; Path=/account; HttpOnly; SameSite=Lax; Max-Age=0; Secure',
    );
  });

  it('parses a Cookie header, first occurrence winning and bad encodings skipped', () => {
    const c = parseCookies('a=1; sf_session=xyz; sf_session=evil; bad=%E0%A4%A; q="quoted"');
    expect(c.get('sf_session')).toBe('xyz');
    expect(c.get('a')).toBe('1');
    expect(c.has('bad')).toBe(false);
    expect(c.get('q')).toBe('quoted');
    expect(parseCookies(undefined).size).toBe(0);
  });
});
