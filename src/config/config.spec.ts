import { describe, expect, it } from '@jest/globals';
import { ConfigError, loadConfig } from './config.js';

describe('loadConfig', () => {
  it('has working defaults with an empty environment', () => {
    const c = loadConfig({});
    expect(c).toMatchObject({ role: 'all', port: 3000, databaseUrl: null, redisUrl: null, rateLimits: { basic: 1000, professional: 5000, enterprise: 10000 } });
    expect(c.baseUrl).toBe('http://localhost:3000');
    expect(c.assetMaxBytes).toBe(25 * 1024 * 1024);
    expect(c.httpKeepAliveTimeoutMs).toBe(65000);
  });

  it.each([
    ['PORT', 'abc'],
    ['PORT', '70000'],
    ['APP_ROLE', 'scheduler'],
    ['DATABASE_URL', 'mysql://x'],
    ['REDIS_URL', 'not a url'],
    ['RATE_LIMIT_BASIC', '0'],
    ['RUN_MIGRATIONS', 'maybe'],
    ['REDIS_PREFIX', 'has space'],
    ['SMS_PROVIDER', 'carrier-pigeon'],
    ['HTTP_KEEP_ALIVE_TIMEOUT_MS', '999'],
    ['HTTP_KEEP_ALIVE_TIMEOUT_MS', '600001'],
    ['HTTP_KEEP_ALIVE_TIMEOUT_MS', '5s'],
  ])('refuses %s=%s and names the variable', (name, value) => {
    expect(() => loadConfig({ [name]: value })).toThrow(ConfigError);
    expect(() => loadConfig({ [name]: value })).toThrow(name);
  });

  it('reads the account console settings: session lifetimes (absolute at least idle), sign-in attempts, Secure cookies for https', () => {
    expect(loadConfig({}).account).toEqual({
      sessionIdleSeconds: 1800,
      sessionAbsoluteSeconds: 43200,
      signInFreeAttemptsPerAccount: 5,
      signInFreeAttemptsPerAddress: 20,
      secureCookies: false,
    });
    expect(loadConfig({ BASE_URL: 'https://crm.example.com' }).account.secureCookies).toBe(true);
    expect(() => loadConfig({ ACCOUNT_SESSION_IDLE_SECONDS: '7200', ACCOUNT_SESSION_ABSOLUTE_SECONDS: '3600' })).toThrow('ACCOUNT_SESSION_ABSOLUTE_SECONDS');
    expect(() => loadConfig({ ACCOUNT_SESSION_IDLE_SECONDS: '10' })).toThrow('ACCOUNT_SESSION_IDLE_SECONDS');
    expect(() => loadConfig({ ACCOUNT_SIGN_IN_FREE_ATTEMPTS: '0' })).toThrow('ACCOUNT_SIGN_IN_FREE_ATTEMPTS');
  });

  it('needs SMS_HTTP_URL for the http provider', () => {
    expect(() => loadConfig({ SMS_PROVIDER: 'http' })).toThrow('SMS_HTTP_URL');
    expect(loadConfig({ SMS_PROVIDER: 'http', SMS_HTTP_URL: 'https://gw.example.com/send' }).smsHttpUrl).toBe('https://gw.example.com/send');
  });

  it('parses CORS origins', () => {
    expect(loadConfig({ CORS_ORIGINS: '*' }).corsOrigins).toBe('*');
    expect(loadConfig({ CORS_ORIGINS: 'https://a.example, https://b.example' }).corsOrigins).toEqual(['https://a.example', 'https://b.example']);
  });

  it('trusts no proxy by default; TRUST_PROXY takes a hop count or proxy addresses/CIDRs, and refuses anything else', () => {
    expect(loadConfig({}).trustProxy).toBe(false);
    expect(loadConfig({ TRUST_PROXY: '' }).trustProxy).toBe(false);
    expect(loadConfig({ TRUST_PROXY: '0' }).trustProxy).toBe(false);
    expect(loadConfig({ TRUST_PROXY: '2' }).trustProxy).toBe(2);
    expect(loadConfig({ TRUST_PROXY: '10.0.0.5, 172.16.0.0/12,::1,loopback' }).trustProxy).toEqual(['10.0.0.5', '172.16.0.0/12', '::1', 'loopback']);
    for (const bad of ['everyone', '10.0.0.0/33', '1.2.3', '10.0.0.1/8/1', '101', 'true'])
      expect(() => loadConfig({ TRUST_PROXY: bad })).toThrow('TRUST_PROXY');
  });
});
