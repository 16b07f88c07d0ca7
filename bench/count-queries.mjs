/**
 * A statement counter, preloaded into an application process (`node --import ./bench/count-queries.mjs dist/main.js`):
 * counts every PostgreSQL statement the process sends (by its first words) and its Redis round trips
 * (commands sent on their own, and pipelines, each one round trip), and writes the counts as JSON
 * to COUNT_QUERIES_FILE every 200 ms. Used by bench/statements.mjs to report statements per request.
 */
import { writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';

const file = process.env.COUNT_QUERIES_FILE;
const require = createRequire(join(process.cwd(), 'package.json'));
const pg = require('pg');
const Redis = require('ioredis').default ?? require('ioredis');
const { Pipeline } = require('ioredis');

const counts = { sql: 0, sqlByKind: {}, sqlMsByKind: {}, sqlMaxMsByKind: {}, redisRoundTrips: 0, redisCommands: 0, redisPipelines: 0, redisByCommand: {} };
let dirty = true;

/** "SELECT", "UPDATE", "WITH ... UPDATE text_messages", "BEGIN", ...: the statement's kind, from its text. */
function kindOf(text) {
  const t = String(text).replace(/\s+/g, ' ').trim();
  const first = t.split(' ', 1)[0].toUpperCase();
  if (first !== 'WITH') return t.slice(0, 60);
  const m = /\b(INSERT INTO \w+|UPDATE \w+|DELETE FROM \w+)/i.exec(t);
  return `WITH … ${m ? m[1] : 'SELECT'} (${t.slice(5, 40)}…)`;
}

function timed(k, t0) {
  const ms = performance.now() - t0;
  counts.sqlMsByKind[k] = (counts.sqlMsByKind[k] ?? 0) + ms;
  counts.sqlMaxMsByKind[k] = Math.max(counts.sqlMaxMsByKind[k] ?? 0, ms);
  dirty = true;
}

const query = pg.Client.prototype.query;
pg.Client.prototype.query = function (config, values, callback) {
  const text = typeof config === 'string' ? config : config?.text;
  if (text === undefined) return query.call(this, config, values, callback);
  counts.sql++;
  const k = kindOf(text);
  counts.sqlByKind[k] = (counts.sqlByKind[k] ?? 0) + 1;
  dirty = true;
  // Time from submission to the answer (a statement waits in the client's queue only behind its own connection's).
  const t0 = performance.now();
  const cb = typeof callback === 'function' ? callback : typeof values === 'function' ? values : null;
  if (cb) {
    const wrapped = (...args) => {
      timed(k, t0);
      return cb(...args);
    };
    return cb === callback ? query.call(this, config, values, wrapped) : query.call(this, config, wrapped);
  }
  const r = query.call(this, config, values);
  if (r && typeof r.then === 'function')
    r.then(
      () => timed(k, t0),
      () => timed(k, t0),
    );
  return r;
};

const sendCommand = Redis.prototype.sendCommand;
Redis.prototype.sendCommand = function (command, stream) {
  // Blocking reads of workers (BZPOPMIN, BRPOPLPUSH...) wait for jobs: counted, but not as load.
  counts.redisCommands++;
  if (!stream) counts.redisRoundTrips++;
  const name = String(command?.name ?? '?');
  counts.redisByCommand[name] = (counts.redisByCommand[name] ?? 0) + 1;
  dirty = true;
  return sendCommand.call(this, command, stream);
};

const exec = Pipeline.prototype.exec;
Pipeline.prototype.exec = function (...args) {
  counts.redisPipelines++;
  counts.redisRoundTrips++;
  dirty = true;
  return exec.apply(this, args);
};

if (file) {
  setInterval(() => {
    if (!dirty) return;
    dirty = false;
    writeFileSync(file, JSON.stringify(counts));
  }, 200).unref();
}
