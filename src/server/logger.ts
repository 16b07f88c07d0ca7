import { type LoggerService } from '@nestjs/common';

const LEVELS = { debug: 10, info: 20, warn: 30, error: 40 } as const;
type Level = keyof typeof LEVELS;

const SECRET_KEYS = /^(authorization|cookie|password|secret|client_secret|token|access_token|refresh_token|x-api-key)$/i;
const BEARER = /\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]+/g;
const TOKEN_LIKE = /\bsf(at)?_[A-Za-z0-9_-]{16,}/g;

/** Removes credentials from anything about to be logged: secret-named keys, bearer values, token strings. */
export function redact(value: unknown, depth = 0): unknown {
  if (depth > 6) return '[…]';
  if (typeof value === 'string') return value.replace(BEARER, '$1 [redacted]').replace(TOKEN_LIKE, '[redacted]');
  if (Array.isArray(value)) return value.map((v) => redact(v, depth + 1));
  if (value && typeof value === 'object') {
    if (value instanceof Error) return { name: value.name, message: redact(value.message), stack: redact(value.stack) };
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = SECRET_KEYS.test(k) ? '[redacted]' : redact(v, depth + 1);
    return out;
  }
  return value;
}

/** Structured JSON logs (one object per line on stdout), or readable lines with LOG_FORMAT=pretty. */
export class AppLogger implements LoggerService {
  constructor(
    private readonly level: Level = 'info',
    private readonly format: 'json' | 'pretty' = 'json',
  ) {}

  log(message: unknown, ...rest: unknown[]) {
    this.write('info', message, rest);
  }
  error(message: unknown, ...rest: unknown[]) {
    this.write('error', message, rest);
  }
  warn(message: unknown, ...rest: unknown[]) {
    this.write('warn', message, rest);
  }
  debug(message: unknown, ...rest: unknown[]) {
    this.write('debug', message, rest);
  }
  verbose(message: unknown, ...rest: unknown[]) {
    this.write('debug', message, rest);
  }

  private write(level: Level, message: unknown, rest: unknown[]) {
    if (LEVELS[level] < LEVELS[this.level]) return;
    // Nest passes the context as the last string argument; an error passes its stack before it.
    rest = rest.filter((r) => r !== undefined && r !== null);
    const context = typeof rest[rest.length - 1] === 'string' ? (rest.pop() as string) : undefined;
    const entry: Record<string, unknown> = { time: new Date().toISOString(), level, context };
    if (message && typeof message === 'object' && !(message instanceof Error)) Object.assign(entry, redact(message));
    else entry.msg = redact(message instanceof Error ? message.message : String(message));
    if (rest.length) entry.extra = redact(rest);
    const line =
      this.format === 'json'
        ? JSON.stringify(entry)
        : `${String(entry.time)} ${level.toUpperCase()} [${context ?? '-'}] ${typeof entry.msg === 'string' ? entry.msg : (JSON.stringify(entry.msg) ?? '')} ${JSON.stringify({ ...entry, time: undefined, level: undefined, context: undefined, msg: undefined })}`;
    (level === 'error' || level === 'warn' ? process.stderr : process.stdout).write(line + '\n');
  }
}
