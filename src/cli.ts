/**
 * Admin command line: users, tokens, migrations, the companies backfill.
 *
 *   npm run --silent cli -- token:create --user <email> --name <name> --permissions <list|*> [--plan <plan>] [--expires <ISO date>]
 *   npm run --silent cli -- user:create --email <email> --name <name> [--plan <plan>] [--team <team>]
 *   npm run --silent cli -- user:list | token:list [--user <email>] | token:revoke --id <id> | migration:run
 *   npm run --silent cli -- user:password --email <email>   (password from stdin, or prompted on a terminal)
 *   npm run --silent cli -- user:invite --email <email>     (prints a one-time URL, valid 72 h, to set it)
 *   npm run --silent cli -- companies:backfill              (companies from the contacts' company strings)
 *
 * In embedded mode (no DATABASE_URL) it connects through the running server's socket when a
 * server owns the data directory, and opens the data directory itself otherwise.
 */
import 'reflect-metadata';
import { type INestApplicationContext, Logger, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { type AppConfig, ConfigError, loadConfig, type Plan, PLANS } from './config/config.js';
import { CommonModule } from './common/common.module.js';
import { ServerModule } from './server/server.module.js';
import { BatchModule } from './batch/batch.module.js';
import { ConfigModule } from './config/config.module.js';
import { DatabaseModule } from './database/database.module.js';
import { findRunningEmbedded, startEmbeddedPostgres, type EmbeddedPostgres } from './database/embedded.js';
import { runMigrations } from './database/migrate.js';
import { RedisModule } from './redis/redis.module.js';
import { AuthModule } from './auth/auth.module.js';
import { TokensService } from './auth/tokens.service.js';
import { UsersService } from './auth/users.service.js';
import { isPermission, PERMISSIONS } from './auth/permissions.js';
import { isUniqueViolation } from './database/constraints.js';
import { parseIsoWithOffset } from './common/dates.js';
import { AppError } from './common/errors.js';
import { ConsoleRepository } from './console/console.repository.js';
import { ConsoleService } from './console/console.service.js';
import { JobsModule } from './jobs/jobs.module.js';
import { CompaniesModule } from './companies/companies.module.js';
import { CompaniesService } from './companies/companies.service.js';

class UsageError extends Error {}

const USAGE = `usage: cli <command> [options]
  user:create   --email <email> --name <name> [--plan basic|professional|enterprise] [--team <team>]
  user:list
  user:password --email <email>   sets the account console password: read from stdin, or prompted twice on a terminal
                (at least 12 characters, not containing the email); ends the user's console sessions
  user:invite   --email <email>   prints a one-time URL, valid 72 hours, where the user sets their password
  token:create  --user <email> --name <name> --permissions <comma list or *> [--plan <plan>] [--expires <ISO date>]
                (creates the user when missing; prints the secret as the last line)
  token:list    [--user <email>]
  token:revoke  --id <token id>
  migration:run
  companies:backfill   creates a company for every distinct contact company string (case-insensitive) that no company has yet
                       and links the contacts without a company; idempotent (POST /api/companies/backfill queues the same work)
permissions: ${PERMISSIONS.join(', ')}`;

function out(line: string) {
  process.stdout.write(line + '\n');
}

function need(values: Record<string, string | undefined>, name: string): string {
  const v = values[name];
  if (!v || !v.trim()) throw new UsageError(`--${name} is required`);
  return v.trim();
}

function plan(value: string | undefined): Plan | undefined {
  if (value === undefined) return undefined;
  if (!(PLANS as readonly string[]).includes(value)) throw new UsageError(`--plan must be one of ${PLANS.join(', ')}`);
  return value as Plan;
}

function email(value: string): string {
  if (!/^[^\s@]+@[^\s@]+\.[^\s@]+$/.test(value)) throw new UsageError(`"${value}" is not an email address`);
  return value;
}

/** The password: prompted twice without echo on a terminal, else the first line of stdin. */
async function readPassword(): Promise<string> {
  if (!process.stdin.isTTY) {
    const chunks: Buffer[] = [];
    for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
    const password = Buffer.concat(chunks).toString('utf8').split(/\r?\n/)[0];
    if (!password) throw new UsageError('no password on stdin');
    return password;
  }
  const ask = (prompt: string) =>
    new Promise<string>((resolve, reject) => {
      process.stderr.write(prompt);
      const stdin = process.stdin;
      stdin.setRawMode(true);
      stdin.resume();
      let value = '';
      const onData = (buf: Buffer) => {
        for (const ch of buf.toString('utf8')) {
          if (ch === '\r' || ch === '\n') {
            stdin.setRawMode(false);
            stdin.pause();
            stdin.off('data', onData);
            process.stderr.write('\n');
            resolve(value);
            return;
          }
          if (ch === '\u0003') {
            stdin.setRawMode(false);
            reject(new UsageError('cancelled'));
            return;
          }
          if (ch === '\u007f' || ch === '\b') value = value.slice(0, -1);
          else value += ch;
        }
      };
      stdin.on('data', onData);
    });
  const first = await ask('New password: ');
  const second = await ask('Repeat it: ');
  if (first !== second) throw new UsageError('the passwords do not match');
  return first;
}

async function withDatabase<T>(config: AppConfig, fn: (url: string) => Promise<T>): Promise<T> {
  let embedded: EmbeddedPostgres | null = null;
  let url = config.databaseUrl;
  if (!url) {
    const dir = join(config.dataDir, 'postgres');
    url = findRunningEmbedded(dir);
    if (!url) {
      embedded = await startEmbeddedPostgres(dir, { waitMs: 10000 });
      url = embedded.url;
    }
  }
  try {
    return await fn(url);
  } finally {
    await embedded?.stop();
  }
}

type Options = ReturnType<typeof parseOptions>;

function parseOptions(args: string[]) {
  return parseArgs({
    args,
    options: {
      email: { type: 'string' },
      name: { type: 'string' },
      plan: { type: 'string' },
      team: { type: 'string' },
      user: { type: 'string' },
      permissions: { type: 'string' },
      expires: { type: 'string' },
      id: { type: 'string' },
    },
    strict: true,
  }).values;
}

function migrate(config: AppConfig): Promise<number> {
  return withDatabase(config, async (url) => {
    const done = await runMigrations(url, (m) => out(m));
    out(done.length ? `${done.length} migration(s) applied` : 'no pending migrations');
    return 0;
  });
}

function backfillCompanies(config: AppConfig): Promise<number> {
  return withDatabase(config, async (url) => {
    await runMigrations(url);
    // The work runs here, in the foreground: jobs in-process (no Redis workers are started).
    @Module({
      imports: [
        ConfigModule.forRoot(config),
        DatabaseModule.forRoot({ ...config, databasePoolSize: 2 }, url),
        RedisModule,
        JobsModule.forRoot({ ...config, redisUrl: null }),
        CommonModule,
        ServerModule,
        BatchModule,
        CompaniesModule,
      ],
    })
    class BackfillModule {}
    const app = await NestFactory.createApplicationContext(BackfillModule, { logger: ['error'] });
    try {
      const run = await app.get(CompaniesService).backfillNow();
      out(`backfill run ${run.id} ${run.status}: ${run.companiesCreated ?? 0} companies created, ${run.contactsLinked ?? 0} contacts linked`);
      return 0;
    } finally {
      await app.close();
    }
  });
}

async function createUser(app: INestApplicationContext, values: Options): Promise<number> {
  const mail = email(need(values, 'email'));
  const u = await app
    .get(UsersService)
    .create({ email: mail, name: need(values, 'name'), plan: plan(values.plan), team: values.team ?? null })
    .catch((e: unknown) => {
      throw isUniqueViolation(e, 'users_email_lower_uq') ? new UsageError(`a user with the email ${mail} already exists`) : e;
    });
  out(`user ${u.id} created: ${u.name} <${u.email}> plan=${u.plan}${u.team ? ` team=${u.team}` : ''}`);
  return 0;
}

/** The email of an existing user (--email). */
async function existingUser(app: INestApplicationContext, values: Options): Promise<string> {
  const mail = email(need(values, 'email'));
  if (!(await app.get(UsersService).findByEmail(mail))) throw new UsageError(`no user with the email ${mail}`);
  return mail;
}

async function setPassword(app: INestApplicationContext, values: Options): Promise<number> {
  const mail = await existingUser(app, values);
  const password = await readPassword();
  try {
    const u = await app.get(ConsoleService).setPassword(mail, password);
    out(`password set for user ${u.id} <${u.email}>; their console sessions were ended`);
  } catch (e) {
    if (e instanceof AppError && e.status === 400) throw new UsageError(`the ${e.message}`);
    throw e;
  }
  return 0;
}

async function inviteUser(app: INestApplicationContext, values: Options): Promise<number> {
  const inv = await app.get(ConsoleService).invite(await existingUser(app, values));
  out(`invitation for user ${inv.user.id} <${inv.user.email}>, valid until ${inv.expiresAt.toISOString()} (once):`);
  out(inv.url);
  return 0;
}

async function listUsers(app: INestApplicationContext): Promise<number> {
  for (const u of await app.get(UsersService).list()) out(`${u.id}\t${u.email}\t${u.name}\t${u.plan}\t${u.team ?? ''}`);
  return 0;
}

/** --permissions: a comma list of known permissions (or *). */
function permissionList(values: Options): string[] {
  const perms = need(values, 'permissions')
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean);
  const bad = perms.filter((p) => !isPermission(p));
  if (!perms.length || bad.length) throw new UsageError(`unknown permission(s): ${bad.join(', ') || '(none given)'}`);
  return perms;
}

/** --expires: an ISO 8601 date-time with offset, or a date (midnight UTC); null when not given. */
function expiry(values: Options): Date | null {
  if (!values.expires) return null;
  const expires = parseIsoWithOffset(values.expires) ?? (/^\d{4}-\d{2}-\d{2}$/.test(values.expires) ? new Date(`${values.expires}T00:00:00Z`) : null);
  if (!expires || Number.isNaN(expires.getTime())) throw new UsageError('--expires must be an ISO 8601 date or date-time with offset');
  return expires;
}

async function createToken(app: INestApplicationContext, values: Options): Promise<number> {
  const users = app.get(UsersService);
  const mail = email(need(values, 'user'));
  const name = need(values, 'name');
  const perms = permissionList(values);
  const expires = expiry(values);
  let user = await users.findByEmail(mail);
  const p = plan(values.plan);
  if (!user) {
    user = await users.create({ email: mail, name: values.team ? mail : mail.split('@')[0], plan: p, team: values.team ?? null });
    out(`user ${user.id} created: ${user.email} plan=${user.plan}`);
  } else if (p && p !== user.plan) {
    user = await users.update(user, { plan: p });
    out(`user ${user.id} plan set to ${user.plan}`);
  }
  // No parent token: a token made here lives until its own expiry or revocation.
  const t = await app.get(TokensService).create(user.id, name, perms, expires, null);
  if (!t) throw new Error('the token was not created');
  out(`token ${t.id} "${name}" created for ${user.email} with ${perms.join(',')}${expires ? ` expiring ${expires.toISOString()}` : ''}`);
  out(t.secret);
  return 0;
}

async function listTokens(app: INestApplicationContext, values: Options): Promise<number> {
  const owner = values.user ? await app.get(UsersService).findByEmail(email(values.user)) : null;
  if (values.user && !owner) throw new UsageError(`no user with the email ${values.user}`);
  const iso = (d: Date | null) => (d ? new Date(d).toISOString() : '-');
  for (const t of await app.get(TokensService).list(owner?.id)) {
    out(`${t.id}\t${t.userEmail}\t${t.name}\t${t.prefix}…\t${t.permissions.join(',')}\t${t.state}\texpires=${iso(t.expiresAt)}\tlastUsed=${iso(t.lastUsedAt)}`);
  }
  return 0;
}

async function revokeToken(app: INestApplicationContext, values: Options): Promise<number> {
  const id = Number(need(values, 'id'));
  if (!Number.isInteger(id) || id < 1) throw new UsageError('--id must be a token id');
  const ok = await app.get(TokensService).revokeApiToken(id);
  out(ok ? `token ${id} revoked` : `token ${id} was not active (unknown or already revoked)`);
  return ok ? 0 : 1;
}

/** The commands on users and tokens: each runs in a small application context (auth and the console's accounts). */
const ACCOUNT_COMMANDS: Record<string, (app: INestApplicationContext, values: Options) => Promise<number>> = {
  'user:create': createUser,
  'user:list': listUsers,
  'user:password': setPassword,
  'user:invite': inviteUser,
  'token:create': createToken,
  'token:list': listTokens,
  'token:revoke': revokeToken,
};

function runAccountCommand(config: AppConfig, command: (app: INestApplicationContext, values: Options) => Promise<number>, values: Options): Promise<number> {
  return withDatabase(config, async (url) => {
    await runMigrations(url);
    @Module({
      // CommonModule: the Clock, which the console's sessions and invitations read.
      imports: [ConfigModule.forRoot(config), DatabaseModule.forRoot({ ...config, databasePoolSize: 2 }, url), RedisModule, CommonModule, AuthModule],
      providers: [ConsoleRepository, ConsoleService],
    })
    class CliModule {}
    const app = await NestFactory.createApplicationContext(CliModule, { logger: ['error'] });
    try {
      return await command(app, values);
    } finally {
      await app.close();
    }
  });
}

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (!command || command === '--help' || command === 'help') {
    out(USAGE);
    return command ? 0 : 64;
  }
  const values = parseOptions(rest);
  const config = loadConfig();
  if (command === 'migration:run') return migrate(config);
  if (command === 'companies:backfill') return backfillCompanies(config);
  if (!Object.hasOwn(ACCOUNT_COMMANDS, command)) throw new UsageError(`unknown command "${command}"`);
  return runAccountCommand(config, ACCOUNT_COMMANDS[command], values);
}

main(process.argv.slice(2))
  .then((code) => process.exit(code))
  .catch((thrown: unknown) => {
    const e = thrown instanceof Error ? thrown : new Error(String(thrown));
    if (e instanceof UsageError || e instanceof ConfigError || (e as NodeJS.ErrnoException).code?.startsWith('ERR_PARSE_ARGS')) {
      process.stderr.write(`error: ${e.message}\n${e instanceof UsageError ? USAGE + '\n' : ''}`);
      process.exit(64);
    }
    new Logger('cli').error(e.message);
    process.stderr.write(`error: ${e.message}\n`);
    process.exit(1);
  });
