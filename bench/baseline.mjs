/**
 * The benchmark's baseline: the least a server must do for the same requests, with no framework.
 * Plain node:http + pg + ioredis: hash the bearer token and look it up in memory, one Redis counter
 * increment (the rate limit), the same SQL as the application, JSON out. Each scenario's result is
 * reported as a ratio against this server on the same machine, database and Redis.
 *
 *   node bench/baseline.mjs   (env: DATABASE_URL, REDIS_URL, PORT, BENCH_TOKEN_HASHES=comma list of sha256)
 */
import { createHash } from 'node:crypto';
import { createServer } from 'node:http';
import pg from 'pg';
import { Redis } from 'ioredis';

const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: Number(process.env.DATABASE_POOL_SIZE ?? 10) });
const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
const tokens = new Map(
  (process.env.BENCH_TOKEN_HASHES ?? '')
    .split(',')
    .filter(Boolean)
    .map((h) => [h, { userId: 1 }]),
);
const COLUMNS = 'id, name, email, phone, company, title, owner_id, fields, created_at, modified_at, created_by, created_by_user, modified_by, modified_by_user';

/** The event's data: the record as the API shows it, built in SQL as the application's outbox insert does. */
const isoSql = (e) => `to_char(${e} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"+00:00"')`;
const EVENT_JSON = `jsonb_build_object('id', c.id, 'name', c.name, 'email', c.email, 'phone', c.phone, 'company', c.company,
  'title', c.title, 'ownerId', c.owner_id, 'owner', NULL, 'fields', coalesce(c.fields, '{}'::jsonb), 'createdAt', ${isoSql('c.created_at')},
  'modifiedAt', ${isoSql('c.modified_at')}, 'createdBy', c.created_by, 'createdByUser', c.created_by_user, 'modifiedBy', c.modified_by,
  'modifiedByUser', c.modified_by_user)`;

const MEMBERSHIP_JSON = `jsonb_build_object('campaignId', m.campaign_id, 'contactId', m.contact_id, 'addedAt', ${isoSql('m.added_at')})`;

const iso = (d) => (d ? new Date(d).toISOString().slice(0, 19) + '+00:00' : null);
const record = (r) => ({
  id: r.id,
  name: r.name,
  email: r.email,
  phone: r.phone,
  company: r.company,
  title: r.title,
  ownerId: r.owner_id,
  owner: r.owner_id ? { id: r.owner_id, name: r.owner_name ?? null } : null,
  fields: r.fields,
  createdAt: iso(r.created_at),
  modifiedAt: iso(r.modified_at),
  createdBy: r.created_by,
  createdByUser: r.created_by_user,
  modifiedBy: r.modified_by,
  modifiedByUser: r.modified_by_user,
});

async function withOwners(rows) {
  const ids = [...new Set(rows.map((r) => r.owner_id).filter(Boolean))];
  if (ids.length) {
    const { rows: users } = await pool.query('SELECT id, name FROM users WHERE id = ANY($1)', [ids]);
    const names = new Map(users.map((u) => [u.id, u.name]));
    for (const r of rows) r.owner_name = names.get(r.owner_id);
  }
  return rows.map(record);
}

async function page(where, params, url) {
  const limit = Math.min(200, Number(url.searchParams.get('limit') ?? 30));
  const offset = (Math.max(1, Number(url.searchParams.get('page') ?? 1)) - 1) * limit;
  const search = url.searchParams.get('search');
  const conds = [...where];
  const args = [...params];
  if (search) {
    args.push('%' + search.toLowerCase().replace(/[\\%_]/g, (c) => '\\' + c) + '%');
    conds.push(`c.search_text LIKE $${args.length}`);
  }
  const w = conds.length ? `WHERE ${conds.join(' AND ')}` : '';
  const total = !conds.length
    ? Number((await pool.query(`SELECT sum(n)::bigint AS n FROM row_counts WHERE table_name = 'contacts'`)).rows[0].n)
    : Number((await pool.query(`SELECT count(1) AS n FROM contacts c ${w}`, args)).rows[0].n);
  const { rows } = await pool.query(`SELECT ${COLUMNS} FROM contacts c ${w} ORDER BY c.id ASC OFFSET ${offset} LIMIT ${limit}`, args);
  return { total, contacts: await withOwners(rows) };
}

function readBody(req) {
  return new Promise((resolve, reject) => {
    let data = '';
    req.on('data', (c) => (data += c));
    req.on('end', () => {
      try {
        resolve(data ? JSON.parse(data) : {});
      } catch (e) {
        reject(e);
      }
    });
  });
}

async function handle(req, res) {
  const auth = req.headers.authorization ?? '';
  const token = tokens.get(createHash('sha256').update(auth.slice(7)).digest('hex'));
  if (!token) return send(res, 401, { error: { code: 'unauthorized', message: 'no', status: 401 } });
  await redis.incr(`baseline:rl:${token.userId}`);
  const url = new URL(req.url, 'http://x');
  const parts = url.pathname.split('/').filter(Boolean); // api, contacts, ...
  if (req.method === 'GET' && parts[1] === 'contacts' && parts.length === 3) {
    const { rows } = await pool.query(`SELECT ${COLUMNS} FROM contacts c WHERE c.id = $1`, [Number(parts[2])]);
    if (!rows.length) return send(res, 404, { error: { code: 'not_found', message: 'no', status: 404 } });
    return send(res, 200, { contact: (await withOwners(rows))[0] });
  }
  if (req.method === 'GET' && parts[1] === 'contacts' && parts.length === 2) return send(res, 200, await page([], [], url));
  if (req.method === 'POST' && parts[1] === 'contacts') {
    const b = await readBody(req);
    // The application writes the contact.created event (the outbox) in the same statement, so the
    // baseline does too; `?outbox=0` leaves it out, for the rows that measure what the outbox costs.
    const outbox = url.searchParams.get('outbox') !== '0';
    try {
      const { rows } = await pool.query(
        outbox
          ? `WITH c AS (INSERT INTO contacts (name, email, phone, company, title, created_by, created_by_user, modified_by, modified_by_user)
                        VALUES ($1,$2,$3,$4,$5,$6,'baseline',$6,'baseline') RETURNING ${COLUMNS}),
                  e AS (INSERT INTO events (type, data, previous) SELECT 'contact.created', ${EVENT_JSON}, NULL::jsonb FROM c)
             SELECT * FROM c`
          : `INSERT INTO contacts (name, email, phone, company, title, created_by, created_by_user, modified_by, modified_by_user)
             VALUES ($1,$2,$3,$4,$5,$6,'baseline',$6,'baseline') RETURNING ${COLUMNS}`,
        [b.name, b.email, b.phone ?? null, b.company ?? null, b.title ?? null, token.userId],
      );
      return send(res, 201, { contact: record(rows[0]) });
    } catch (e) {
      if (e.code === '23505') return send(res, 409, { error: { code: 'conflict', message: 'taken', status: 409 } });
      throw e;
    }
  }
  if (req.method === 'POST' && parts[1] === 'campaigns' && parts[3] === 'contact' && parts[5] === 'add') {
    // As on create: the application writes campaign.contact_added (the outbox) in the same statement,
    // for a new membership only, so the baseline does too; `?outbox=0` leaves it out.
    const outbox = url.searchParams.get('outbox') !== '0';
    await pool.query(
      outbox
        ? `WITH m AS (INSERT INTO campaign_members (campaign_id, contact_id) VALUES ($1, $2) ON CONFLICT DO NOTHING RETURNING campaign_id, contact_id, added_at)
           INSERT INTO events (type, data, previous) SELECT 'campaign.contact_added', ${MEMBERSHIP_JSON}, NULL::jsonb FROM m`
        : 'INSERT INTO campaign_members (campaign_id, contact_id) VALUES ($1, $2) ON CONFLICT DO NOTHING',
      [Number(parts[2]), Number(parts[4])],
    );
    return send(res, 200, { success: true });
  }
  if (req.method === 'GET' && parts[1] === 'campaigns' && parts[3] === 'contacts') {
    return send(res, 200, await page(['EXISTS (SELECT 1 FROM campaign_members m WHERE m.contact_id = c.id AND m.campaign_id = $1)'], [Number(parts[2])], url));
  }
  return send(res, 404, { error: { code: 'not_found', message: 'no route', status: 404 } });
}

function send(res, status, body) {
  const json = JSON.stringify(body);
  res.writeHead(status, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': Buffer.byteLength(json) });
  res.end(json);
}

const server = createServer((req, res) => {
  handle(req, res).catch((e) => send(res, 500, { error: { code: 'internal_error', message: e.message, status: 500 } }));
});
server.keepAliveTimeout = 65_000;
server.listen(Number(process.env.PORT ?? 3999), '127.0.0.1', () => process.stdout.write(`baseline listening on ${process.env.PORT ?? 3999}\n`));
process.on('SIGTERM', () => server.close(() => Promise.all([pool.end(), redis.quit()]).then(() => process.exit(0))));
