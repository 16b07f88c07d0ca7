/**
 * Admin command line: users, tokens, migrations.
 *
 *   npm run --silent cli -- token:create --user <email> --name <name> --permissions <list|*> [--plan <plan>] [--expires <ISO date>]
 *   npm run --silent cli -- user:create --email <email> --name <name> [--plan <plan>] [--team <team>]
 *   npm run --silent cli -- user:list | token:list [--user <email>] | token:revoke --id <id> | migration:run
 *
 * In embedded mode (no DATABASE_URL) it connects through the running server's socket when a
 * server owns the data directory, and opens the data directory itself otherwise.
 */
import 'reflect-metadata';
import { Logger, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { type AppConfig, ConfigError, loadConfig, type Plan, PLANS } from './config/config.js';
import { ConfigModule } from './config/config.module.js';
import { DatabaseModule } from './database/database.module.js';
import { findRunningEmbedded, startEmbeddedPostgres, type EmbeddedPostgres } from './database/embedded.js';
import { runMigrations } from './database/migrate.js';
import { RedisModule } from './redis/redis.module.js';
import { AuthModule } from './auth/auth.module.js';
import { TokensService } from './auth/tokens.service.js';
import { UsersService } from './auth/users.service.js';
import { isPermission, PERMISSIONS } from './auth/permissions.js';
import { isUniqueViolation } from './common/constraints.js';
import { parseIsoWithOffset } from './common/dates.js';

class UsageError extends Error {}

const USAGE = `usage: cli <command> [options]
  user:create   --email <email> --name <name> [--plan basic|professional|enterprise] [--team <team>]
  user:list
  token:create  --user <email> --name <name> --permissions <comma list or *> [--plan <plan>] [--expires <ISO date>]
                (creates the user when missing; prints the secret as the last line)
  token:list    [--user <email>]
  token:revoke  --id <token id>
  migration:run
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

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (!command || command === '--help' || command === 'help') {
    out(USAGE);
    return command ? 0 : 64;
  }
  const { values } = parseArgs({
    args: rest,
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
  });
  const config = loadConfig();

  if (command === 'migration:run') {
    return withDatabase(config, async (url) => {
      const done = await runMigrations(url, (m) => out(m));
      out(done.length ? `${done.length} migration(s) applied` : 'no pending migrations');
      return 0;
    });
  }
  if (!['user:create', 'user:list', 'token:create', 'token:list', 'token:revoke'].includes(command)) {
    throw new UsageError(`unknown command "${command}"`);
  }

  return withDatabase(config, async (url) => {
    await runMigrations(url);
    @Module({ imports: [ConfigModule.forRoot(config), DatabaseModule.forRoot({ ...config, databasePoolSize: 2 }, url), RedisModule, AuthModule] })
    class CliModule {}
    const app = await NestFactory.createApplicationContext(CliModule, { logger: ['error'] });
    try {
      const users = app.get(UsersService);
      const tokens = app.get(TokensService);
      switch (command) {
        case 'user:create': {
          const mail = email(need(values, 'email'));
          const u = await users.create({ email: mail, name: need(values, 'name'), plan: plan(values.plan), team: values.team ?? null }).catch((e: unknown) => {
            throw isUniqueViolation(e, 'users_email_lower_uq') ? new UsageError(`a user with the email ${mail} already exists`) : e;
          });
          out(`user ${u.id} created: ${u.name} <${u.email}> plan=${u.plan}${u.team ? ` team=${u.team}` : ''}`);
          return 0;
        }
        case 'user:list': {
          for (const u of await users.list()) out(`${u.id}\t${u.email}\t${u.name}\t${u.plan}\t${u.team ?? ''}`);
          return 0;
        }
        case 'token:create': {
          const mail = email(need(values, 'user'));
          const name = need(values, 'name');
          const perms = need(values, 'permissions')
            .split(',')
            .map((p) => p.trim())
            .filter(Boolean);
          const bad = perms.filter((p) => !isPermission(p));
          if (!perms.length || bad.length) throw new UsageError(`unknown permission(s): ${bad.join(', ') || '(none given)'}`);
          let expires: Date | null = null;
          if (values.expires) {
            expires = parseIsoWithOffset(values.expires) ?? (/^\d{4}-\d{2}-\d{2}$/.test(values.expires) ? new Date(`${values.expires}T00:00:00Z`) : null);
            if (!expires || Number.isNaN(expires.getTime())) throw new UsageError('--expires must be an ISO 8601 date or date-time with offset');
          }
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
          const t = await tokens.create(user.id, name, perms, expires, null);
          if (!t) throw new Error('the token was not created');
          out(`token ${t.id} "${name}" created for ${user.email} with ${perms.join(',')}${expires ? ` expiring ${expires.toISOString()}` : ''}`);
          out(t.secret);
          return 0;
        }
        case 'token:list': {
          const owner = values.user ? await users.findByEmail(email(values.user)) : null;
          if (values.user && !owner) throw new UsageError(`no user with the email ${values.user}`);
          const iso = (d: Date | null) => (d ? new Date(d).toISOString() : '-');
          for (const t of await tokens.list(owner?.id)) {
            out(`${t.id}\t${t.userEmail}\t${t.name}\t${t.prefix}…\t${t.permissions.join(',')}\t${t.state}\texpires=${iso(t.expiresAt)}\tlastUsed=${iso(t.lastUsedAt)}`);
          }
          return 0;
        }
        case 'token:revoke': {
          const id = Number(need(values, 'id'));
          if (!Number.isInteger(id) || id < 1) throw new UsageError('--id must be a token id');
          const ok = await tokens.revokeApiToken(id);
          out(ok ? `token ${id} revoked` : `token ${id} was not active (unknown or already revoked)`);
          return ok ? 0 : 1;
        }
      }
      return 64;
    } finally {
      await app.close();
    }
  });
}

main(process.argv.slice(2))
  .then((code) => process.exit(code))
  .catch((e: Error) => {
    if (e instanceof UsageError || e instanceof ConfigError || (e as NodeJS.ErrnoException).code?.startsWith('ERR_PARSE_ARGS')) {
      process.stderr.write(`error: ${e.message}\n${e instanceof UsageError ? USAGE + '\n' : ''}`);
      process.exit(64);
    }
    new Logger('cli').error(e.message);
    process.stderr.write(`error: ${e.message}\n`);
    process.exit(1);
  });
