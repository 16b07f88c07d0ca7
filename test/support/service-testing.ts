/**
 * The service test layer: a spec file builds the real Nest module graph (AppModule) on the
 * machine's PostgreSQL, in a database of its own with every migration applied, with the jobs run
 * in-process and no Redis. Only the SMS provider (and, where a spec needs it, the clock via jest's
 * fake timers) is faked. Use from `src/<feature>/<name>.service.spec.ts`:
 *
 *   const ctx = await startServiceContext();
 *   const contacts = ctx.get(ContactsService);
 *   ...
 *   afterAll(() => ctx.close());
 */
import { afterAll, beforeAll, expect } from '@jest/globals';
import { type INestApplicationContext, type Type } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AppModule } from '../../src/app.module.js';
import { type AppConfig, loadConfig } from '../../src/config/config.js';
import { AppError } from '../../src/common/errors.js';
import { translateConstraintError } from '../../src/database/constraints.js';
import { runMigrations } from '../../src/database/migrate.js';
import { JobQueue } from '../../src/jobs/job-queue.js';
import { Transactions } from '../../src/database/transactions.js';
import type { Principal } from '../../src/common/request.js';
import { SmsProvider, type OutboundSms, type SendResult } from '../../src/sms/sms-provider.js';
import { createDatabase } from './app.js';

/** An SMS provider that records what it is handed and answers as told. */
export class FakeSmsProvider extends SmsProvider {
  readonly name = 'fake';
  readonly maxCallMs = 1000;
  readonly sent: OutboundSms[] = [];
  next: (sms: OutboundSms) => Promise<SendResult> = async (sms) => ({ providerMessageId: `fake-${sms.messageId}` });
  async send(sms: OutboundSms): Promise<SendResult> {
    this.sent.push(sms);
    return this.next(sms);
  }
}

export interface ServiceContext {
  app: INestApplicationContext;
  config: AppConfig;
  sms: FakeSmsProvider;
  databaseUrl: string;
  get<T>(type: Type<T>): T;
  /** Runs SQL on the spec's database (for arranging state and asserting on rows). */
  query<T = Record<string, unknown>>(sql: string, params?: unknown[]): Promise<T[]>;
  /** A principal for a user created in the spec's database (the admin user by default). */
  principal(overrides?: Partial<Principal>): Promise<Principal>;
  /**
   * The AppError a call fails with: thrown by the service, or translated by the constraint registry
   * as the global exception filter does. Fails the test when the call succeeds or fails otherwise.
   */
  failure(call: Promise<unknown>): Promise<AppError>;
  /** A contact inserted straight into the database (`name`, a unique email starting with `prefix`); answers its id. */
  contact(name?: string, prefix?: string): Promise<number>;
  close(): Promise<void>;
}

/** What a service spec starts from: its context and a '*' principal of a fresh user. */
export interface ServiceSpec {
  ctx: ServiceContext;
  who: Principal;
}

/** Starts a spec's context (see startServiceContext) with the principal most specs act as. */
export async function startServiceSpec(env: Record<string, string> = {}): Promise<ServiceSpec> {
  const ctx = await startServiceContext(env);
  return { ctx, who: await ctx.principal() };
}

/**
 * Registers the set-up most service specs share: before the file's tests, a context and a '*'
 * principal (startServiceSpec); after them, the context closed. The tests read `spec.ctx` and
 * `spec.who`, set once the hook has run.
 */
export function useServiceSpec(env: Record<string, string> = {}): ServiceSpec {
  const spec = {} as ServiceSpec;
  beforeAll(async () => {
    Object.assign(spec, await startServiceSpec(env));
  });
  afterAll(async () => {
    await spec.ctx?.close();
  });
  return spec;
}

/** The AppError a call is rejected with, as thrown (no translation); fails the test otherwise. */
export async function appError(call: Promise<unknown>): Promise<AppError> {
  const e = await call.then(
    () => null,
    (err: unknown) => err,
  );
  expect(e).toBeInstanceOf(AppError);
  return e as AppError;
}

let contactSeq = 0;

export async function startServiceContext(env: Record<string, string> = {}): Promise<ServiceContext> {
  const db = await createDatabase();
  await runMigrations(db.url);
  const dataDir = mkdtempSync(join(tmpdir(), 'sf-svc-'));
  const config = loadConfig({
    NODE_ENV: 'test',
    LOG_LEVEL: 'error',
    DATABASE_URL: db.url,
    DATA_DIR: dataDir,
    STORAGE_DIR: join(dataDir, 'storage'),
    RUN_MIGRATIONS: 'false',
    ...env,
  });
  const sms = new FakeSmsProvider();
  const moduleRef = await Test.createTestingModule({ imports: [AppModule.forRoot(config, db.url)] })
    .overrideProvider(SmsProvider)
    .useValue(sms)
    .setLogger({ log() {}, error() {}, warn() {}, debug() {}, verbose() {}, fatal() {} })
    .compile();
  const app = await moduleRef.init();
  // The worker's start tasks (re-queueing, schedules) run in the background: a spec starts after them,
  // so a recovery pass does not pick up the rows it writes.
  const jobs = app.get(JobQueue);
  if (jobs.runsWorkers) await jobs.started;
  const tx = app.get(Transactions);
  const ctx: ServiceContext = {
    app,
    config,
    sms,
    databaseUrl: db.url,
    get: (type) => app.get(type),
    query: (sql, params = []) => tx.db.query(sql, params),
    async principal(overrides = {}) {
      const rows = await tx.db.query(`INSERT INTO users (email, name, plan) VALUES ($1, $2, 'enterprise') RETURNING id, name`, [
        `svc-${Date.now()}-${Math.random().toString(36).slice(2)}@example.test`,
        'Service Spec',
      ]);
      const user = rows[0] as { id: number; name: string };
      return {
        userId: user.id,
        userName: user.name,
        plan: 'enterprise',
        team: null,
        apiTokenId: 0,
        permissions: new Set(['*']),
        kind: 'api_token',
        expiresAt: null,
        ...overrides,
      };
    },
    async failure(call) {
      try {
        await call;
      } catch (e) {
        if (e instanceof AppError) return e;
        const translated = await translateConstraintError(e, (sql, params) => tx.db.query(sql, params));
        if (translated) return translated;
        throw e;
      }
      throw new Error('expected the call to fail');
    },
    async contact(name = 'Contact', prefix = 'c') {
      const rows = await tx.db.query(`INSERT INTO contacts (name, email) VALUES ($1, $2) RETURNING id`, [
        name,
        `${prefix}${++contactSeq}-${Date.now()}@svc.test`,
      ]);
      return (rows[0] as { id: number }).id;
    },
    async close() {
      await app.close();
      await db.drop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
  return ctx;
}
