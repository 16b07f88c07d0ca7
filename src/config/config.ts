/**
 * One typed, validated configuration object, read once from the environment at boot.
 * A bad value stops the process with a message naming the variable (see ConfigError).
 */
import { isIP } from 'node:net';
import { resolve } from 'node:path';

export type AppRole = 'api' | 'worker' | 'all';
export type Plan = 'basic' | 'professional' | 'enterprise';
export const PLANS: readonly Plan[] = ['basic', 'professional', 'enterprise'];

export interface AppConfig {
  env: string;
  role: AppRole;
  port: number;
  host: string;
  baseUrl: string;
  /** PostgreSQL connection string; null means "start the embedded PostgreSQL under dataDir". */
  databaseUrl: string | null;
  /** Hot fixed statements run as named (prepared) statements on the pool (database/transactions.ts `prepared`). */
  databasePreparedStatements: boolean;
  databasePoolSize: number;
  dataDir: string;
  /** Redis connection string; null means in-process jobs and in-memory counters. */
  redisUrl: string | null;
  /** Prefix for every Redis key this instance writes (queues, counters, pub/sub channels). */
  redisPrefix: string;
  runMigrations: boolean;
  rateLimits: Record<Plan, number>;
  rateLimitWindowSeconds: number;
  anonymousRateLimit: number;
  anonymousRateLimitWindowSeconds: number;
  tokenCacheTtlSeconds: number;
  bodyLimitBytes: number;
  /** Largest JSON body of a batch route (`POST /api/<resource>/batch`, BATCH_BODY_LIMIT_BYTES): 500 items need more than one record. */
  batchBodyLimitBytes: number;
  assetMaxBytes: number;
  /** Largest CSV upload of POST /api/imports (IMPORT_MAX_BYTES, default 200 MiB). */
  importMaxBytes: number;
  /** Rows an import writes and checkpoints per transaction (IMPORT_CHUNK_ROWS, 1..500). */
  importChunkRows: number;
  /** Chunks one import writes at once, each in its own transaction (IMPORT_PARALLEL_CHUNKS, 1..8). */
  importParallelChunks: number;
  /** How long an export's download link stays valid (EXPORT_LINK_TTL_SECONDS). */
  exportLinkTtlSeconds: number;
  storageDir: string;
  accessTokenTtlSeconds: number;
  /** Requests per minute and client address to the OAuth2 token and revocation endpoints. */
  oauthRateLimitPerMinute: number;
  corsOrigins: string[] | '*' | null;
  /**
   * Which proxies' X-Forwarded-For (and -Proto) headers to believe (TRUST_PROXY): false (unset) =
   * none, the client address is the connection's; a number = that many proxy hops in front; a
   * list = only connections from these addresses/CIDRs (or loopback/linklocal/uniquelocal).
   */
  trustProxy: false | number | string[];
  logLevel: 'debug' | 'info' | 'warn' | 'error';
  logFormat: 'json' | 'pretty';
  shutdownGraceMs: number;
  /**
   * How long the HTTP server keeps an idle keep-alive connection open (HTTP_KEEP_ALIVE_TIMEOUT_MS):
   * above the idle timeout of the load balancers in front (60 s for most), so that they, not the
   * server, close idle connections and never reuse one the server is closing.
   */
  httpKeepAliveTimeoutMs: number;
  smsProvider: 'log' | 'http';
  smsHttpUrl: string | null;
  smsHttpToken: string | null;
  smsWebhookSecret: string | null;
  smsRateLimitPerSecond: number;
  /** Single-send jobs one worker process runs at once (SMS_WORKER_CONCURRENCY): each waits mostly on the provider's answer. */
  smsWorkerConcurrency: number;
  /** Provider calls per second across every worker (shared through Redis); 0 = no cap. */
  smsMaxPerSecond: number;
  /** Parallel sending jobs (lanes) per broadcast; each claims batches of its messages. */
  smsBroadcastLanes: number;
  /** How long one call to the HTTP SMS gateway may take before its outcome counts as unknown. */
  smsHttpTimeoutMs: number;
  /** Text messages left `queued` this long are queued again by the periodic recovery, which runs every smsRecoverEveryMs. */
  smsRecoverAfterMs: number;
  smsRecoverEveryMs: number;
  /** BullMQ job lock: a job whose worker stops renewing it for this long is run again (stalled). */
  jobLockMs: number;
  /** Cron patterns (UTC) behind the report schedules; overridable for tests only (REPORT_SCHEDULE_<NAME>). */
  reportSchedulePatterns: { daily: string; weekly: string; monthly: string };
  metricsToken: string | null;
  /** TEST_CLOCK_FILE: a file holding the clock's offset in milliseconds (common/clock.ts); refused in production. */
  testClockFile: string | null;
  commit: string;
  campaignCompletionIntervalMs: number; // period of the job that completes campaigns past their endDate
  /** How often the segments refresher rebuilds pending dynamic segments and re-evaluates changed contacts (SEGMENT_REFRESH_INTERVAL_MS). */
  segmentRefreshIntervalMs: number;
  /** Workflows: the runner's fallback poll for due enrollments and trigger ticks (WORKFLOW_POLL_INTERVAL_MS), and a claim's lease (WORKFLOW_LEASE_MS). */
  workflowPollIntervalMs: number;
  workflowLeaseMs: number;
  /** How often the scoring rule applier reads the change feed when nothing wakes it (SCORING_APPLY_INTERVAL_MS). */
  scoringApplyIntervalMs: number;
  /** How often the scoring decay job checks whether a decay period has ended (SCORING_DECAY_CHECK_MS). */
  scoringDecayCheckMs: number;
  /** Webhooks: allow http:// targets (WEBHOOK_ALLOW_HTTP) and loopback/link-local/private addresses (WEBHOOK_ALLOW_PRIVATE). */
  webhookAllowHttp: boolean;
  webhookAllowPrivate: boolean;
  /** One webhook delivery's whole request (connect, send, answer) may take this long. */
  webhookTimeoutMs: number;
  /** Delay before a failed delivery's first retry; each further retry waits 4 times longer (at most 12 h), for 72 h. */
  webhookRetryFirstDelayMs: number;
  /** How often the dispatcher looks for new events to deliver. */
  webhookDispatchIntervalMs: number;
  /** Days the event feed keeps events (EVENT_RETENTION_DAYS); the events.prune job removes older ones. */
  eventRetentionDays: number;
  /** Days tracked events are kept (TRACKING_RETENTION_DAYS); the tracking.partitions job drops whole monthly partitions past it. */
  trackingRetentionDays: number;
  /** Idempotency-Key: hours a recorded answer is replayed (IDEMPOTENCY_TTL_HOURS; the idempotency.prune job removes older ones). */
  idempotencyTtlHours: number;
  /** Idempotency-Key: seconds an in-progress key stays claimed before a retry may take it over (a crashed request's lease). */
  idempotencyLeaseSeconds: number;
  /** The signed-in account console (/account). */
  account: ConsoleConfig;
}

export interface ConsoleConfig {
  /** A session unused for this long is over (idle lifetime). */
  sessionIdleSeconds: number;
  /** A session is over this long after sign-in, however active (absolute lifetime). */
  sessionAbsoluteSeconds: number;
  /** Failed sign-ins per account (email) and per client address, within 15 minutes, before each further attempt must wait. */
  signInFreeAttemptsPerAccount: number;
  signInFreeAttemptsPerAddress: number;
  /** Session cookies carry `Secure` (BASE_URL is https). */
  secureCookies: boolean;
}

export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    detail: string,
  ) {
    super(`Invalid configuration: ${variable} ${detail}`);
  }
}

type Env = Record<string, string | undefined>;

function str(env: Env, name: string, fallback: string): string {
  const v = env[name];
  return v === undefined || v === '' ? fallback : v;
}

function optional(env: Env, name: string): string | null {
  const v = env[name];
  return v === undefined || v.trim() === '' ? null : v.trim();
}

function int(env: Env, name: string, fallback: number, min: number, max = Number.MAX_SAFE_INTEGER): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (!/^\d+$/.test(raw.trim())) throw new ConfigError(name, `must be a whole number, got "${raw}"`);
  const n = Number(raw.trim());
  if (n < min || n > max) throw new ConfigError(name, `must be between ${min} and ${max}, got ${n}`);
  return n;
}

function bool(env: Env, name: string, fallback: boolean): boolean {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const v = raw.trim().toLowerCase();
  if (['1', 'true', 'yes', 'on'].includes(v)) return true;
  if (['0', 'false', 'no', 'off'].includes(v)) return false;
  throw new ConfigError(name, `must be true or false, got "${raw}"`);
}

function oneOf<T extends string>(env: Env, name: string, allowed: readonly T[], fallback: T): T {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (!(allowed as readonly string[]).includes(raw)) {
    throw new ConfigError(name, `must be one of ${allowed.join(', ')}, got "${raw}"`);
  }
  return raw as T;
}

function url(env: Env, name: string, protocols: string[]): string | null {
  const v = optional(env, name);
  if (v === null) return null;
  let parsed: URL;
  try {
    parsed = new URL(v);
  } catch {
    throw new ConfigError(name, 'must be a valid URL');
  }
  if (!protocols.includes(parsed.protocol)) {
    throw new ConfigError(name, `must use ${protocols.join(' or ')}, got ${parsed.protocol}`);
  }
  return v;
}

function cron(env: Env, name: string, fallback: string): string {
  const v = str(env, name, fallback).trim();
  if (!/^[0-9*/,\- ]+$/.test(v) || ![5, 6].includes(v.split(/\s+/).length)) {
    throw new ConfigError(name, `must be a cron pattern of 5 or 6 fields (digits, *, /, ",", -), got "${v}"`);
  }
  return v;
}

const PROXY_NAMES = new Set(['loopback', 'linklocal', 'uniquelocal']);

/** TRUST_PROXY: unset/empty/false = trust no proxy; a hop count; or a comma list of proxy addresses or CIDRs. */
function trustProxy(env: Env): false | number | string[] {
  const raw = (env.TRUST_PROXY ?? '').trim();
  if (raw === '' || raw.toLowerCase() === 'false') return false;
  if (/^\d+$/.test(raw)) {
    const hops = Number(raw);
    if (hops > 100) throw new ConfigError('TRUST_PROXY', `hop count must be between 0 and 100, got ${hops}`);
    return hops === 0 ? false : hops;
  }
  const entries = raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  for (const e of entries) {
    if (PROXY_NAMES.has(e)) continue;
    const [addr, bits, ...rest] = e.split('/');
    const family = isIP(addr);
    const okBits = bits === undefined || (/^\d+$/.test(bits) && Number(bits) <= (family === 6 ? 128 : 32));
    if (!family || !okBits || rest.length) {
      throw new ConfigError('TRUST_PROXY', `must be a hop count or a comma list of proxy addresses/CIDRs (or loopback, linklocal, uniquelocal), got "${e}"`);
    }
  }
  return entries.length ? entries : false;
}

/** SMS_PROVIDER and the gateway it needs (SMS_HTTP_URL with the http provider). */
function smsGateway(env: Env) {
  const smsProvider = oneOf(env, 'SMS_PROVIDER', ['log', 'http'] as const, 'log');
  const smsHttpUrl = url(env, 'SMS_HTTP_URL', ['http:', 'https:']);
  if (smsProvider === 'http' && !smsHttpUrl) {
    throw new ConfigError('SMS_HTTP_URL', 'is required when SMS_PROVIDER=http');
  }
  return { smsProvider, smsHttpUrl };
}

function redisPrefix(env: Env): string {
  const prefix = str(env, 'REDIS_PREFIX', 'sf');
  if (!/^[A-Za-z0-9_.-]{1,64}$/.test(prefix)) {
    throw new ConfigError('REDIS_PREFIX', 'may hold only letters, digits, "_", "." and "-" (1..64 characters)');
  }
  return prefix;
}

/** The console's session lifetimes: the absolute one at least the idle one. */
function sessionLifetimes(env: Env) {
  const sessionIdleSeconds = int(env, 'ACCOUNT_SESSION_IDLE_SECONDS', 1800, 60, 86400 * 7);
  const sessionAbsoluteSeconds = int(env, 'ACCOUNT_SESSION_ABSOLUTE_SECONDS', 43200, 300, 86400 * 30);
  if (sessionAbsoluteSeconds < sessionIdleSeconds) {
    throw new ConfigError(
      'ACCOUNT_SESSION_ABSOLUTE_SECONDS',
      `must be at least ACCOUNT_SESSION_IDLE_SECONDS (${sessionIdleSeconds}), got ${sessionAbsoluteSeconds}`,
    );
  }
  return { sessionIdleSeconds, sessionAbsoluteSeconds };
}

/** Database, Redis, rate limits, request and file sizes, tokens. */
function storageAndLimits(env: Env, prefix: string) {
  return {
    databaseUrl: url(env, 'DATABASE_URL', ['postgres:', 'postgresql:']),
    databasePoolSize: int(env, 'DATABASE_POOL_SIZE', 10, 1, 200),
    databasePreparedStatements: bool(env, 'DATABASE_PREPARED_STATEMENTS', true),
    dataDir: resolve(str(env, 'DATA_DIR', './data')),
    redisUrl: url(env, 'REDIS_URL', ['redis:', 'rediss:']),
    redisPrefix: prefix,
    runMigrations: bool(env, 'RUN_MIGRATIONS', true),
    rateLimits: {
      basic: int(env, 'RATE_LIMIT_BASIC', 1000, 1),
      professional: int(env, 'RATE_LIMIT_PROFESSIONAL', 5000, 1),
      enterprise: int(env, 'RATE_LIMIT_ENTERPRISE', 10000, 1),
    },
    rateLimitWindowSeconds: int(env, 'RATE_LIMIT_WINDOW_SECONDS', 3600, 1, 86400 * 31),
    anonymousRateLimit: int(env, 'RATE_LIMIT_ANONYMOUS', 60, 1),
    anonymousRateLimitWindowSeconds: int(env, 'RATE_LIMIT_ANONYMOUS_WINDOW_SECONDS', 60, 1, 86400),
    tokenCacheTtlSeconds: int(env, 'TOKEN_CACHE_TTL_SECONDS', 30, 0, 3600),
    bodyLimitBytes: int(env, 'BODY_LIMIT_BYTES', 1024 * 1024, 1024, 100 * 1024 * 1024),
    batchBodyLimitBytes: int(env, 'BATCH_BODY_LIMIT_BYTES', 8 * 1024 * 1024, 1024, 100 * 1024 * 1024),
    assetMaxBytes: int(env, 'ASSET_MAX_BYTES', 25 * 1024 * 1024, 1, 10 * 1024 * 1024 * 1024),
    importMaxBytes: int(env, 'IMPORT_MAX_BYTES', 200 * 1024 * 1024, 1, 100 * 1024 * 1024 * 1024),
    importChunkRows: int(env, 'IMPORT_CHUNK_ROWS', 500, 1, 500),
    importParallelChunks: int(env, 'IMPORT_PARALLEL_CHUNKS', 2, 1, 8),
    exportLinkTtlSeconds: int(env, 'EXPORT_LINK_TTL_SECONDS', 3600, 10, 7 * 86400),
    storageDir: resolve(str(env, 'STORAGE_DIR', './data/storage')),
    accessTokenTtlSeconds: int(env, 'OAUTH_ACCESS_TOKEN_TTL_SECONDS', 3600, 1, 86400 * 30),
    oauthRateLimitPerMinute: int(env, 'OAUTH_RATE_LIMIT_PER_MINUTE', 20, 1, 100000),
  };
}

/** CORS_ORIGINS: unset (null), `*`, or a comma list of origins. */
function corsOrigins(cors: string | null): string[] | '*' | null {
  if (cors === null) return null;
  if (cors === '*') return '*';
  return cors
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

/** Logging, shutdown, SMS, jobs, reports, metrics, the change feed, webhooks and idempotency. */
function operations(env: Env, sms: ReturnType<typeof smsGateway>) {
  return {
    logLevel: oneOf(env, 'LOG_LEVEL', ['debug', 'info', 'warn', 'error'] as const, 'info'),
    logFormat: oneOf(env, 'LOG_FORMAT', ['json', 'pretty'] as const, 'json'),
    shutdownGraceMs: int(env, 'SHUTDOWN_GRACE_MS', 10000, 0, 600000),
    httpKeepAliveTimeoutMs: int(env, 'HTTP_KEEP_ALIVE_TIMEOUT_MS', 65000, 1000, 600000),
    ...sms,
    smsHttpToken: optional(env, 'SMS_HTTP_TOKEN'),
    smsWebhookSecret: optional(env, 'SMS_WEBHOOK_SECRET'),
    smsRateLimitPerSecond: int(env, 'SMS_RATE_LIMIT_PER_SECOND', 100, 1, 100000),
    smsWorkerConcurrency: int(env, 'SMS_WORKER_CONCURRENCY', 32, 1, 256),
    smsMaxPerSecond: int(env, 'SMS_MAX_PER_SECOND', 0, 0, 1000000),
    smsBroadcastLanes: int(env, 'SMS_BROADCAST_LANES', 2, 1, 16),
    smsHttpTimeoutMs: int(env, 'SMS_HTTP_TIMEOUT_MS', 10000, 100, 120000),
    smsRecoverAfterMs: int(env, 'SMS_RECOVER_AFTER_MS', 120000, 1000, 86400000),
    smsRecoverEveryMs: int(env, 'SMS_RECOVER_EVERY_MS', 300000, 1000, 86400000),
    jobLockMs: int(env, 'JOB_LOCK_MS', 30000, 1000, 600000),
    reportSchedulePatterns: {
      daily: cron(env, 'REPORT_SCHEDULE_DAILY', '0 0 * * *'),
      weekly: cron(env, 'REPORT_SCHEDULE_WEEKLY', '0 0 * * 1'),
      monthly: cron(env, 'REPORT_SCHEDULE_MONTHLY', '0 0 1 * *'),
    },
    metricsToken: optional(env, 'METRICS_TOKEN'),
    testClockFile: testClockFile(env),
    commit: str(env, 'GIT_COMMIT', 'unknown'),
    campaignCompletionIntervalMs: int(env, 'CAMPAIGN_COMPLETION_INTERVAL_MS', 60_000, 100, 86_400_000),
    segmentRefreshIntervalMs: int(env, 'SEGMENT_REFRESH_INTERVAL_MS', 1_000, 50, 60_000),
    workflowPollIntervalMs: int(env, 'WORKFLOW_POLL_INTERVAL_MS', 1_000, 50, 60_000),
    workflowLeaseMs: int(env, 'WORKFLOW_LEASE_MS', 60_000, 1_000, 3_600_000),
    scoringApplyIntervalMs: int(env, 'SCORING_APPLY_INTERVAL_MS', 1_000, 50, 60_000),
    scoringDecayCheckMs: int(env, 'SCORING_DECAY_CHECK_MS', 60_000, 100, 86_400_000),
    webhookAllowHttp: bool(env, 'WEBHOOK_ALLOW_HTTP', false),
    webhookAllowPrivate: bool(env, 'WEBHOOK_ALLOW_PRIVATE', false),
    webhookTimeoutMs: int(env, 'WEBHOOK_TIMEOUT_MS', 10_000, 100, 60_000),
    webhookRetryFirstDelayMs: int(env, 'WEBHOOK_RETRY_FIRST_DELAY_MS', 5_000, 10, 3_600_000),
    webhookDispatchIntervalMs: int(env, 'WEBHOOK_DISPATCH_INTERVAL_MS', 500, 20, 60_000),
    eventRetentionDays: int(env, 'EVENT_RETENTION_DAYS', 7, 1, 3650),
    trackingRetentionDays: int(env, 'TRACKING_RETENTION_DAYS', 395, 1, 3650),
    idempotencyTtlHours: int(env, 'IDEMPOTENCY_TTL_HOURS', 24, 1, 24 * 30),
    idempotencyLeaseSeconds: int(env, 'IDEMPOTENCY_LEASE_SECONDS', 60, 1, 3600),
  };
}

/** TEST_CLOCK_FILE moves the service's clock from outside: for test suites, never for production. */
function testClockFile(env: Env): string | null {
  const file = optional(env, 'TEST_CLOCK_FILE');
  if (file !== null && str(env, 'NODE_ENV', 'production') === 'production')
    throw new ConfigError('TEST_CLOCK_FILE', 'is for test suites and cannot be set when NODE_ENV is production');
  return file;
}

export function loadConfig(env: Env = process.env): AppConfig {
  const port = int(env, 'PORT', 3000, 0, 65535);
  const host = str(env, 'HOST', '0.0.0.0');
  const baseUrl = (url(env, 'BASE_URL', ['http:', 'https:']) ?? `http://localhost:${port}`).replace(/\/+$/, '');
  const cors = optional(env, 'CORS_ORIGINS');
  const sms = smsGateway(env);
  const prefix = redisPrefix(env);
  const sessions = sessionLifetimes(env);
  return {
    env: str(env, 'NODE_ENV', 'production'),
    role: oneOf(env, 'APP_ROLE', ['api', 'worker', 'all'] as const, 'all'),
    port,
    host,
    baseUrl,
    ...storageAndLimits(env, prefix),
    corsOrigins: corsOrigins(cors),
    trustProxy: trustProxy(env),
    ...operations(env, sms),
    account: {
      ...sessions,
      signInFreeAttemptsPerAccount: int(env, 'ACCOUNT_SIGN_IN_FREE_ATTEMPTS', 5, 1, 1000),
      signInFreeAttemptsPerAddress: int(env, 'ACCOUNT_SIGN_IN_FREE_ATTEMPTS_PER_ADDRESS', 20, 1, 100000),
      secureCookies: baseUrl.startsWith('https:'),
    },
  };
}

/** Nest injection token for the AppConfig object. */
export const APP_CONFIG = Symbol('APP_CONFIG');
