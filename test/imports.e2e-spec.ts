/**
 * Import and export jobs over HTTP: a CSV with bad rows (errors listed,
 * good rows in), delimiters and BOM, dry runs, cancel, permissions, Idempotency-Key, the export
 * round trip into an empty database, signed download links; and, with the API and the worker as
 * separate processes, a worker killed with SIGKILL mid-import resuming without duplicates.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { readdirSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { expectError, startApp, type TestApp } from './support/app.js';
import { adminToken, tokenFor } from './support/fixtures.js';
import { sleep, waitUntil } from './support/wait.js';

interface ImportRecord {
  id: number;
  status: string;
  counts: { total: number | null; processed: number; created: number; updated: number; skipped: number; failed: number };
  progress: number;
  error: string | null;
  durationMs: number | null;
}

const until = <T>(what: string, probe: () => Promise<T | null | undefined | false>, timeoutMs = 90000) => waitUntil(what, probe, timeoutMs);

function csvOf(rows: string[][], delimiter = ','): string {
  const cell = (v: string) => (/[",;\t\n]/.test(v) ? `"${v.replace(/"/g, '""')}"` : v);
  return rows.map((r) => r.map(cell).join(delimiter)).join('\n') + '\n';
}

function upload(app: TestApp, auth: string, csv: string | Buffer, fields: Record<string, string>) {
  const req = app.http.post('/api/imports').set('Authorization', auth);
  for (const [k, v] of Object.entries(fields)) void req.field(k, v);
  return req.attach('file', Buffer.isBuffer(csv) ? csv : Buffer.from(csv), { filename: 'people.csv', contentType: 'text/csv' });
}

async function finished(app: TestApp, auth: string, id: number): Promise<ImportRecord> {
  return until(`import ${id} to end`, async () => {
    const r = await app.http.get(`/api/imports/${id}`).set('Authorization', auth);
    expect(r.status).toBe(200);
    const imp = r.body.import as ImportRecord;
    return ['completed', 'failed', 'canceled'].includes(imp.status) ? imp : null;
  });
}

describe('import and export jobs', () => {
  let app: TestApp;
  let auth: string;

  beforeAll(async () => {
    // LOG_LEVEL info: the client-abort test reads the line an abort logs at info.
    app = await startApp({ noRedis: true, env: { RATE_LIMIT_ENTERPRISE: '1000000', LOG_LEVEL: 'info' } });
    auth = await adminToken(app);
    for (const [label, type] of [
      ['Score', 'number'],
      ['Vip', 'boolean'],
      ['Tags', 'multiselect'],
    ] as const) {
      const body: Record<string, unknown> = { label, type };
      if (type === 'multiselect')
        body.properties = {
          list: [
            { label: 'A', value: 'a' },
            { label: 'B', value: 'b' },
          ],
        };
      const f = await app.http.post('/api/fields/contact/new').set('Authorization', auth).send(body);
      expect(f.status).toBe(201);
    }
  }, 120000);
  afterAll(async () => app?.stop());

  it('imports a CSV with bad rows: the good rows are in, every bad row is listed with its column, as JSON and as CSV', async () => {
    const csv = csvOf([
      ['Full name', 'E-mail', 'score', 'vip', 'tags', 'Note'],
      ['Ann', 'ann@imp1.test', '12', 'yes', 'a|b', 'x'],
      ['No email', '', '3', '', '', ''],
      ['Bad score', 'bad@imp1.test', 'twelve', '', '', ''],
      ['', '', '', '', '', 'only an ignored column'],
      ['Ann again', 'ANN@imp1.test', '13', '', '', ''],
      ['Bob', 'bob@imp1.test', '', 'no', 'c', ''],
      ['Cy', 'cy@imp1.test', '', '', '', ''],
    ]);
    const r = await upload(app, auth, `\uFEFF${csv}`, {
      object: 'contacts',
      mode: 'upsert',
      mapping: JSON.stringify({ 'Full name': 'name', 'E-mail': 'email', score: 'fields.score', vip: 'fields.vip', tags: 'fields.tags', Note: 'ignore' }),
    });
    expect(r.status).toBe(202);
    expect(r.body.import).toMatchObject({ id: expect.any(Number), status: 'queued' });
    const imp = await finished(app, auth, r.body.import.id);
    expect(imp.status).toBe('completed');
    expect(imp.progress).toBe(1);
    // Row 4 is empty once ignored columns are left out (skipped); row 5 names ann's email again (same chunk: 409).
    expect(imp.counts).toEqual({ total: 7, processed: 7, created: 2, updated: 0, skipped: 1, failed: 4 });
    const ann = await app.sql<{ name: string; fields: Record<string, unknown> }>(`SELECT name, fields FROM contacts WHERE email = 'ann@imp1.test'`);
    expect(ann).toEqual([{ name: 'Ann', fields: { score: 12, vip: true, tags: ['a', 'b'] } }]);
    expect((await app.sql(`SELECT 1 FROM contacts WHERE email IN ('bad@imp1.test')`)).length).toBe(0);
    const errors = await app.http.get(`/api/imports/${imp.id}/errors`).set('Authorization', auth);
    expect(errors.status).toBe(200);
    const byRow = new Map<number, { column: string | null; code: string; message: string }[]>();
    for (const e of errors.body.errors) byRow.set(e.row, [...(byRow.get(e.row) ?? []), e]);
    expect([...byRow.keys()].sort()).toEqual([2, 3, 5, 6]);
    expect(byRow.get(2)?.[0]).toMatchObject({ column: 'E-mail', code: 'validation_failed' });
    expect(byRow.get(3)?.[0]).toMatchObject({ column: 'score', code: 'validation_failed' });
    expect(byRow.get(5)?.[0]).toMatchObject({ column: 'E-mail', code: 'conflict' });
    expect(byRow.get(5)?.[0].message).toContain('row 1');
    expect(byRow.get(6)?.[0]).toMatchObject({ column: 'tags', code: 'validation_failed' });
    const asCsv = await app.http.get(`/api/imports/${imp.id}/errors?format=csv`).set('Authorization', auth);
    expect(asCsv.status).toBe(200);
    expect(asCsv.headers['content-type']).toMatch(/^text\/csv/);
    const lines = asCsv.text.trim().split('\n');
    expect(lines[0]).toBe('row,column,code,message');
    expect(lines).toHaveLength(1 + errors.body.total);
    // The import wrote each contact with its event, as the single-record route does.
    const events = await app.sql<{ n: string }>(`SELECT count(*) AS n FROM events WHERE type = 'contact.created' AND data->>'email' LIKE '%@imp1.test'`);
    expect(Number(events[0].n)).toBe(2);
    const done = await app.sql<{ n: string }>(`SELECT count(*) AS n FROM events WHERE type = 'import.completed' AND (data->>'id')::int = $1`, [imp.id]);
    expect(Number(done[0].n)).toBe(1);
    const notes = await app.http.get('/api/notifications').set('Authorization', auth);
    expect(
      notes.body.notifications.some((n: { type: string; details: { importId?: number } }) => n.type === 'import_completed' && n.details.importId === imp.id),
    ).toBe(true);
  });

  it('detects ; and tab delimiters; upsert updates existing contacts by email; emptyValues clear sets null', async () => {
    const header = ['name', 'email', 'title'];
    const first = await upload(app, auth, csvOf([header, ['Dee', 'dee@imp2.test', 'CEO'], ['Eve', 'eve@imp2.test', 'CTO']], ';'), {
      object: 'contacts',
      mode: 'create',
    });
    expect(first.status).toBe(202);
    expect((await finished(app, auth, first.body.import.id)).counts).toMatchObject({ created: 2, failed: 0 });
    const second = await upload(app, auth, csvOf([header, ['Dee Two', 'dee@imp2.test', ''], ['Fay', 'fay@imp2.test', 'CFO']], '\t'), {
      object: 'contacts',
      mode: 'upsert',
      emptyValues: 'clear',
    });
    const imp = await finished(app, auth, second.body.import.id);
    expect(imp.counts).toMatchObject({ created: 1, updated: 1, failed: 0 });
    const rows = await app.sql<{ email: string; name: string; title: string | null }>(
      `SELECT email, name, title FROM contacts WHERE email LIKE '%@imp2.test' ORDER BY email`,
    );
    expect(rows).toEqual([
      { email: 'dee@imp2.test', name: 'Dee Two', title: null },
      { email: 'eve@imp2.test', name: 'Eve', title: 'CTO' },
      { email: 'fay@imp2.test', name: 'Fay', title: 'CFO' },
    ]);
  });

  it('a dry run checks every row and counts the outcome, and writes nothing', async () => {
    const footprint = `SELECT (SELECT count(*) FROM contacts) + (SELECT count(*) FROM events WHERE type <> 'import.completed') AS n`;
    const before = await app.sql<{ n: string }>(footprint);
    const r = await upload(
      app,
      auth,
      csvOf([
        ['name', 'email'],
        ['Gus', 'gus@imp3.test'],
        ['No mail', ''],
        ['Dee Three', 'dee@imp2.test'],
      ]),
      {
        object: 'contacts',
        mode: 'upsert',
        dryRun: 'true',
      },
    );
    expect(r.status).toBe(202);
    const imp = await finished(app, auth, r.body.import.id);
    expect(imp.status).toBe('completed');
    expect(imp.counts).toMatchObject({ total: 3, created: 1, updated: 1, failed: 1 });
    const errors = await app.http.get(`/api/imports/${imp.id}/errors`).set('Authorization', auth);
    expect(errors.body.errors).toHaveLength(1);
    expect(errors.body.errors[0]).toMatchObject({ row: 2, column: 'email' });
    expect((await app.sql(`SELECT 1 FROM contacts WHERE email = 'gus@imp3.test'`)).length).toBe(0);
    expect((await app.sql<{ name: string }>(`SELECT name FROM contacts WHERE email = 'dee@imp2.test'`))[0].name).toBe('Dee Two');
    // Nothing but the import's own completion event was written.
    const after = await app.sql<{ n: string }>(footprint);
    expect(after[0].n).toBe(before[0].n);
  });

  it("a points column sets contacts' points as ledger rows (source import, the difference), in the import's transaction", async () => {
    const group = await app.http.post('/api/point-groups').set('Authorization', auth).send({ name: 'Imported hot', minimumPoints: 30, maximumPoints: 100 });
    expect(group.status).toBe(201);
    const known = await app.http.post('/api/contacts').set('Authorization', auth).send({ name: 'Pat', email: 'pts1@imp-points.test' });
    expect(known.status).toBe(201);
    const patId = known.body.contact.id as number;
    expect((await app.http.post(`/api/contacts/${patId}/points`).set('Authorization', auth).send({ delta: 10, reason: 'before' })).status).toBe(201);
    // The contacts API keeps refusing points, the batch route included: they change through the ledger.
    const batch = await app.http
      .post('/api/contacts/batch')
      .set('Authorization', auth)
      .send({ mode: 'create', items: [{ name: 'Batch', email: 'batch@imp-points.test', points: 3 }] });
    expect(batch.body.results[0]).toMatchObject({ status: 400, error: { details: [{ field: 'points', message: expect.stringContaining('/points') }] } });

    const r = await upload(
      app,
      auth,
      csvOf([
        ['name', 'email', 'points'],
        ['Pat', 'pts1@imp-points.test', '25'],
        ['Quin', 'pts2@imp-points.test', '40'],
        ['Ray', 'pts3@imp-points.test', 'many'],
        ['Sam', 'pts4@imp-points.test', '3000000000'],
        ['Tia', 'pts5@imp-points.test', ''],
        ['Uma', 'pts6@imp-points.test', '0'],
      ]),
      { object: 'contacts', mode: 'upsert' },
    );
    expect(r.status).toBe(202);
    const imp = await finished(app, auth, r.body.import.id);
    expect(imp.counts).toMatchObject({ total: 6, created: 3, updated: 1, failed: 2 });
    const errors = (await app.http.get(`/api/imports/${imp.id}/errors`).set('Authorization', auth)).body.errors as { row: number; column: string }[];
    expect(errors.map((e) => [e.row, e.column])).toEqual([
      [3, 'points'],
      [4, 'points'],
    ]);
    expect((await app.sql(`SELECT 1 FROM contacts WHERE email IN ('pts3@imp-points.test', 'pts4@imp-points.test')`)).length).toBe(0);
    const points = async () =>
      Object.fromEntries(
        (
          await app.sql<{ email: string; points: number; ledger: number }>(
            `SELECT c.email, c.points, (SELECT coalesce(sum(delta), 0)::int FROM point_ledger l WHERE l.contact_id = c.id) AS ledger
               FROM contacts c WHERE c.email LIKE '%@imp-points.test' ORDER BY c.email`,
          )
        ).map((c) => [c.email.split('@')[0], [c.points, c.ledger]]),
      );
    expect(await points()).toEqual({ pts1: [25, 25], pts2: [40, 40], pts5: [0, 0], pts6: [0, 0] });
    const history = await app.http.get(`/api/contacts/${patId}/points/history`).set('Authorization', auth);
    expect(history.body.pointChanges).toMatchObject([
      {
        delta: 15,
        source: 'import',
        reason: expect.stringContaining(`import ${imp.id}`),
        details: { importId: imp.id, row: 1 },
        by: { id: expect.any(Number) },
      },
      { delta: 10, source: 'manual' },
    ]);
    // Quin entered the point group as any change of points makes it.
    const quin = (await app.sql<{ id: number }>(`SELECT id FROM contacts WHERE email = 'pts2@imp-points.test'`))[0].id;
    const entered = await app.sql(
      `SELECT 1 FROM events WHERE type = 'contact.point_group_entered' AND (data->>'contactId')::int = $1 AND (data->'pointGroup'->>'id')::int = $2`,
      [quin, group.body.pointGroup.id],
    );
    expect(entered).toHaveLength(1);

    // A dry run sets nothing; an empty cell with emptyValues clear sets 0 (a ledger row of the difference).
    const dry = await upload(
      app,
      auth,
      csvOf([
        ['email', 'points'],
        ['pts1@imp-points.test', '99'],
      ]),
      { object: 'contacts', mode: 'upsert', dryRun: 'true' },
    );
    expect((await finished(app, auth, dry.body.import.id)).counts).toMatchObject({ updated: 1, failed: 0 });
    expect((await points()).pts1).toEqual([25, 25]);
    const clear = await upload(
      app,
      auth,
      csvOf([
        ['email', 'points'],
        ['pts1@imp-points.test', ''],
        ['pts2@imp-points.test', '-7'],
      ]),
      { object: 'contacts', mode: 'upsert', emptyValues: 'clear' },
    );
    expect((await finished(app, auth, clear.body.import.id)).counts).toMatchObject({ updated: 2, failed: 0 });
    expect(await points()).toMatchObject({ pts1: [0, 0], pts2: [-7, -7] });
    // JSON rows take points as numbers; text is the row's error.
    const json = await app.http
      .post('/api/imports')
      .set('Authorization', auth)
      .send({
        object: 'contacts',
        mode: 'upsert',
        rows: [
          { name: 'Vic', email: 'pts7@imp-points.test', points: 12 },
          { name: 'Wes', email: 'pts8@imp-points.test', points: '12' },
        ],
      });
    expect(json.status).toBe(202);
    expect((await finished(app, auth, json.body.import.id)).counts).toMatchObject({ created: 1, failed: 1 });
    expect((await points()).pts7).toEqual([12, 12]);
    expect((await app.http.delete(`/api/point-groups/${group.body.pointGroup.id}`).set('Authorization', auth)).status).toBe(200);
  });

  it('JSON rows, Idempotency-Key (a replay answers the same import, another body is 422), and 400s for what cannot work', async () => {
    const body = {
      object: 'contacts',
      mode: 'create',
      rows: [
        { name: 'Hal', email: 'hal@imp4.test' },
        { name: 'Ida', email: 'ida@imp4.test', fields: { score: 5 } },
      ],
    };
    const first = await app.http.post('/api/imports').set('Authorization', auth).set('Idempotency-Key', 'imp-json-1').send(body);
    expect(first.status).toBe(202);
    const replay = await app.http.post('/api/imports').set('Authorization', auth).set('Idempotency-Key', 'imp-json-1').send(body);
    expect(replay.status).toBe(202);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.body.import.id).toBe(first.body.import.id);
    expectError(
      await app.http
        .post('/api/imports')
        .set('Authorization', auth)
        .set('Idempotency-Key', 'imp-json-1')
        .send({ ...body, rows: [] }),
      422,
      'idempotency_key_mismatch',
    );
    // segmentId: every imported contact joins the static segment; a dynamic or unknown segment is a 400.
    const seg = (await app.http.post('/api/segments').set('Authorization', auth).send({ name: 'Imported', type: 'static' })).body.segment;
    const dyn = (
      await app.http
        .post('/api/segments')
        .set('Authorization', auth)
        .send({ name: 'Dyn', type: 'dynamic', filter: { field: 'email', op: 'endsWith', value: '@imp4.test' } })
    ).body.segment;
    const intoSegment = await app.http
      .post('/api/imports')
      .set('Authorization', auth)
      .send({
        object: 'contacts',
        mode: 'upsert',
        segmentId: seg.id,
        rows: [
          { name: 'Seg One', email: 'seg1@imp4s.test' },
          { name: 'Seg Two', email: 'seg2@imp4s.test' },
        ],
      });
    expect(intoSegment.status).toBe(202);
    expect(intoSegment.body.import.segmentId).toBe(seg.id);
    const segImport = await finished(app, auth, intoSegment.body.import.id);
    expect({ status: segImport.status, error: (segImport as { error?: unknown }).error ?? null, ...segImport.counts }).toMatchObject({
      status: 'completed',
      created: 2,
      failed: 0,
    });
    const members = await app.http.get(`/api/segments/${seg.id}/contacts`).set('Authorization', auth);
    expect(members.body.contacts.map((c: { email: string }) => c.email).sort()).toEqual(['seg1@imp4s.test', 'seg2@imp4s.test']);
    const badSegment = async (segmentId: number, pattern: RegExp) => {
      const e = expectError(
        await app.http
          .post('/api/imports')
          .set('Authorization', auth)
          .send({ ...body, segmentId }),
        400,
        'validation_failed',
      );
      expect(e.details?.[0]).toMatchObject({ field: 'segmentId' });
      expect(e.details?.[0]?.message).toMatch(pattern);
    };
    await badSegment(dyn.id, /static/);
    await badSegment(999999, /does not exist/);

    // A CSV upload takes the key too, matched by its size: a retry of the same upload answers the same import.
    const csv = 'name,email\nJo,jo@imp4.test\n';
    const fields = { object: 'contacts', mode: 'create', mapping: JSON.stringify({ name: 'name', email: 'email' }) };
    const uploaded = await upload(app, auth, csv, fields).set('Idempotency-Key', 'imp-csv-1');
    expect(uploaded.status).toBe(202);
    const uploadedAgain = await upload(app, auth, csv, fields).set('Idempotency-Key', 'imp-csv-1');
    expect(uploadedAgain.headers['idempotent-replayed']).toBe('true');
    expect(uploadedAgain.body.import.id).toBe(uploaded.body.import.id);
    expectError(await upload(app, auth, `${csv}Kim,kim@imp4.test\n`, fields).set('Idempotency-Key', 'imp-csv-1'), 422, 'idempotency_key_mismatch');
    await finished(app, auth, uploaded.body.import.id);

    const imp = await finished(app, auth, first.body.import.id);
    expect({ ...imp.counts, status: imp.status, error: imp.error }).toMatchObject({ total: 2, created: 2, failed: 0, status: 'completed' });
    expect((await app.sql(`SELECT 1 FROM contacts WHERE email LIKE '%@imp4.test'`)).length).toBe(3);

    for (const refused of [{ object: 'users' }, { rows: ['x'] }, { idProperty: 'phone' }, { campaignId: 999999 }]) {
      expectError(
        await app.http
          .post('/api/imports')
          .set('Authorization', auth)
          .send({ ...body, ...refused }),
        400,
        'validation_failed',
      );
    }
    expectError(await upload(app, auth, 'name,email\n', { object: 'contacts' }), 400, 'validation_failed');
    expectError(await app.http.post('/api/imports').set('Authorization', auth).field('object', 'contacts').field('mode', 'create'), 400, 'validation_failed');
    expectError(await app.http.get('/api/imports/999999').set('Authorization', auth), 404, 'not_found');
    expectError(await app.http.get(`/api/imports/${imp.id}/errors?limit=0`).set('Authorization', auth), 400, 'validation_failed');
    expectError(await app.http.get(`/api/imports/${imp.id}/errors?format=xml`).set('Authorization', auth), 400, 'validation_failed');
    // Nothing of a refused upload stays in storage.
    const left = readdirSync(join(app.env.STORAGE_DIR, 'imports'));
    const open = await app.sql<{ n: string }>(
      `SELECT count(*) AS n FROM imports WHERE storage_key IS NOT NULL AND status IN ('queued', 'validating', 'running')`,
    );
    expect(left.filter((f) => !f.endsWith('.part')).length).toBeLessThanOrEqual(Number(open[0].n));
  });

  it('a file whose mapping does not fit its header fails with the reason; a file that is not CSV fails', async () => {
    const r = await upload(
      app,
      auth,
      csvOf([
        ['name', 'email'],
        ['Jo', 'jo@imp5.test'],
      ]),
      { object: 'contacts', mode: 'create', mapping: JSON.stringify({ Mail: 'email' }) },
    );
    const imp = await finished(app, auth, r.body.import.id);
    expect(imp.status).toBe('failed');
    expect(imp.error).toContain('mapping.Mail');
    const bad = await upload(app, auth, 'name,email\n"Jo,jo@imp5.test\n', { object: 'contacts', mode: 'create' });
    const failed = await finished(app, auth, bad.body.import.id);
    expect(failed.status).toBe('failed');
    expect(failed.error).toMatch(/not valid CSV/);
  });

  it("permissions: imports:write plus the object's write permission; exports:write plus its read permission", async () => {
    const importsOnly = await tokenFor(app, 'imports:write,imports:read');
    const rows = { object: 'contacts', mode: 'create', rows: [{ name: 'Kim', email: 'kim@imp6.test' }] };
    expectError(await app.http.post('/api/imports').set('Authorization', importsOnly).send(rows), 403, 'forbidden');
    const contactsOnly = await tokenFor(app, 'contacts:write');
    expectError(await app.http.post('/api/imports').set('Authorization', contactsOnly).send(rows), 403, 'forbidden');
    const both = await tokenFor(app, 'imports:write,contacts:write');
    expect((await app.http.post('/api/imports').set('Authorization', both).send(rows)).status).toBe(202);
    expectError(
      await app.http
        .post('/api/imports')
        .set('Authorization', both)
        .send({ ...rows, object: 'deals' }),
      403,
      'forbidden',
    );
    const exportsOnly = await tokenFor(app, 'exports:write');
    expectError(await app.http.post('/api/exports').set('Authorization', exportsOnly).send({ object: 'contacts', format: 'csv' }), 403, 'forbidden');
    expectError(await app.http.get('/api/imports/1').set('Authorization', exportsOnly), 403, 'forbidden');
  });

  it('cancel: an open import stops, what was committed stays, a second cancel is a 409; parallel cancels: one wins', async () => {
    const rows = [['name', 'email']];
    for (let i = 0; i < 20000; i++) rows.push([`P${i}`, `p${i}@imp7.test`]);
    const r = await upload(app, auth, csvOf(rows), { object: 'contacts', mode: 'create' });
    const id = r.body.import.id as number;
    await until('the import to be running', async () => {
      const imp = (await app.http.get(`/api/imports/${id}`).set('Authorization', auth)).body.import as ImportRecord;
      return imp.status === 'running' || imp.status === 'completed' ? imp : null;
    });
    const answers = await Promise.all([0, 1, 2].map(() => app.http.post(`/api/imports/${id}/cancel`).set('Authorization', auth)));
    const statuses = answers.map((a) => a.status).sort();
    if (statuses.some((s) => s >= 500)) throw new Error(`cancel answered ${JSON.stringify(answers.map((a) => a.body))}\n${app.logs.join('').slice(-4000)}`);
    const completedFirst = answers.every((a) => a.status === 409);
    if (!completedFirst) {
      expect(statuses).toEqual([200, 409, 409]);
      const imp = await finished(app, auth, id);
      expect(imp.status).toBe('canceled');
      await sleep(1500);
      const after = (await app.http.get(`/api/imports/${id}`).set('Authorization', auth)).body.import as ImportRecord;
      const stored = await app.sql<{ n: string }>(`SELECT count(*) AS n FROM contacts WHERE email LIKE '%@imp7.test'`);
      // The rows committed before the cancel are in; the worker wrote nothing after it.
      expect(Number(stored[0].n)).toBe(after.counts.created);
      // Usually mid-file; a cancel that lands between the last chunk's commit and the finish still cancels (nothing is left to stop).
      expect(after.counts.processed).toBeLessThanOrEqual(20000);
    }
    expectError(await app.http.post(`/api/imports/${id}/cancel`).set('Authorization', auth), 409, 'conflict');
    expectError(await app.http.post('/api/imports/999999/cancel').set('Authorization', auth), 404, 'not_found');
  });

  it('exports contacts (CSV with custom field columns, filtered; JSON Lines) through a signed, expiring link', async () => {
    const r = await app.http.post('/api/exports').set('Authorization', auth).send({ object: 'contacts', format: 'csv', filter: 'email[endsWith]:@imp1.test' });
    expect(r.status).toBe(202);
    const exp = await until('the export', async () => {
      const g = await app.http.get(`/api/exports/${r.body.export.id}`).set('Authorization', auth);
      return g.body.export.status === 'completed' ? g.body.export : null;
    });
    expect(exp.rows).toBe(2);
    const url = new URL(exp.download.url as string);
    const file = await app.http.get(`${url.pathname}${url.search}`);
    expect(file.status).toBe(200);
    expect(file.headers['content-type']).toMatch(/^text\/csv/);
    const lines = file.text.trim().split('\n');
    expect(lines[0]).toBe(
      'id,name,email,externalId,phone,company,companyId,title,ownerId,points,pointGroups,createdAt,modifiedAt,fields.score,fields.vip,fields.tags',
    );
    expect(lines).toHaveLength(3);
    expect(lines.find((l) => l.includes('ann@imp1.test'))).toMatch(/,12,true,a\|b$/);
    // A changed signature, a link of another export and an expired link are refused; no token is needed or taken.
    expectError(await app.http.get(`${url.pathname}?expires=${url.searchParams.get('expires')}&signature=${'0'.repeat(64)}`), 401, 'unauthorized');
    expectError(
      await app.http.get(`${url.pathname}?expires=${Number(url.searchParams.get('expires')) + 1}&signature=${url.searchParams.get('signature')}`),
      401,
      'unauthorized',
    );
    expectError(await app.http.get(url.pathname).set('Authorization', auth), 401, 'unauthorized');
    expectError(await app.http.get(`/api/exports/${exp.id + 1}/download${url.search}`), 401, 'unauthorized');
    expectError(
      await app.http.post('/api/exports').set('Authorization', auth).send({ object: 'contacts', format: 'csv', filter: 'nope eq 1' }),
      400,
      'validation_failed',
    );
    expectError(await app.http.post('/api/exports').set('Authorization', auth).send({ object: 'contacts', format: 'xml' }), 400, 'validation_failed');
    expectError(
      await app.http
        .post('/api/exports')
        .set('Authorization', auth)
        .send({ object: 'contacts', format: 'csv', fields: ['secret'] }),
      400,
      'validation_failed',
    );

    const j = await app.http
      .post('/api/exports')
      .set('Authorization', auth)
      .send({ object: 'contacts', format: 'jsonl', fields: ['email', 'fields.score'], filter: { field: 'email', op: 'endsWith', value: '@imp1.test' } });
    expect(j.status).toBe(202);
    const jexp = await until('the jsonl export', async () => {
      const g = await app.http.get(`/api/exports/${j.body.export.id}`).set('Authorization', auth);
      return g.body.export.status === 'completed' ? g.body.export : null;
    });
    const ju = new URL(jexp.download.url as string);
    const jfile = await app.http
      .get(`${ju.pathname}${ju.search}`)
      .buffer(true)
      .parse((res, cb) => {
        let data = '';
        res.on('data', (c: Buffer) => (data += c.toString()));
        res.on('end', () => cb(null, data));
      });
    expect(jfile.headers['content-type']).toMatch(/^application\/x-ndjson/);
    const records = (jfile.body as string)
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(records).toEqual([
      { email: 'ann@imp1.test', fields: { score: 12 } },
      { email: 'cy@imp1.test', fields: { score: null } },
    ]);
  });

  it("reading an export needs the object's read permission; another user's export is a 404 unless the token holds *", async () => {
    const r = await app.http.post('/api/exports').set('Authorization', auth).send({ object: 'contacts', format: 'jsonl' });
    expect(r.status).toBe(202);
    const id = r.body.export.id as number;
    await until('the export', async () => {
      const g = await app.http.get(`/api/exports/${id}`).set('Authorization', auth);
      return g.body.export.status === 'completed' ? g.body.export : null;
    });
    // The same user: exports:read alone is a 403 naming contacts:read; with it, the link (not cached).
    const exportsRead = await tokenFor(app, 'exports:read');
    expect(expectError(await app.http.get(`/api/exports/${id}`).set('Authorization', exportsRead), 403, 'forbidden').message).toContain('contacts:read');
    const reader = await tokenFor(app, 'exports:read,contacts:read');
    const mine = await app.http.get(`/api/exports/${id}`).set('Authorization', reader);
    expect(mine.status).toBe(200);
    expect(mine.body.export.download.url).toContain(`/api/exports/${id}/download?`);
    expect(mine.headers['cache-control']).toBe('private, no-store');
    // Another user: a 404 (as for an id that does not exist), unless the token holds *.
    const otherReader = await tokenFor(app, 'exports:read,exports:write,contacts:read', { user: 'other-exporter@example.com' });
    expectError(await app.http.get(`/api/exports/${id}`).set('Authorization', otherReader), 404, 'not_found');
    const otherAdmin = await tokenFor(app, '*', { user: 'other-exporter@example.com' });
    expect((await app.http.get(`/api/exports/${id}`).set('Authorization', otherAdmin)).status).toBe(200);
    // The other user's own export is theirs to read, and not the first user's limited token's.
    const theirs = await app.http.post('/api/exports').set('Authorization', otherReader).send({ object: 'contacts', format: 'csv' });
    expect(theirs.status).toBe(202);
    expect((await app.http.get(`/api/exports/${theirs.body.export.id}`).set('Authorization', otherReader)).status).toBe(200);
    expectError(await app.http.get(`/api/exports/${theirs.body.export.id}`).set('Authorization', reader), 404, 'not_found');
  });

  it("another user's import, its errors and its cancel are a 404 unless the token holds *", async () => {
    const csv = csvOf([
      ['name', 'email'],
      ['Own', 'not-an-email'],
    ]);
    const imp = await finished(app, auth, (await upload(app, auth, csv, { object: 'contacts', mode: 'create' })).body.import.id);
    expect(imp.counts).toMatchObject({ total: 1, failed: 1 });
    const other = await tokenFor(app, 'imports:read,imports:write,contacts:write', { user: 'other-importer@example.com' });
    for (const path of [`/api/imports/${imp.id}`, `/api/imports/${imp.id}/errors`, `/api/imports/${imp.id}/errors?format=csv`]) {
      expectError(await app.http.get(path).set('Authorization', other), 404, 'not_found');
    }
    expectError(await app.http.post(`/api/imports/${imp.id}/cancel`).set('Authorization', other), 404, 'not_found');
    const otherAdmin = await tokenFor(app, '*', { user: 'other-importer@example.com' });
    expect((await app.http.get(`/api/imports/${imp.id}/errors`).set('Authorization', otherAdmin)).body.errors).toHaveLength(1);
    // The same user's narrower token reads its own import.
    const mine = await tokenFor(app, 'imports:read');
    expect((await app.http.get(`/api/imports/${imp.id}`).set('Authorization', mine)).body.import.id).toBe(imp.id);
  });

  it('deals and companies: import through their own batch paths (create, update by id), export with a filter', async () => {
    const [ann] = await app.sql<{ id: number }>(`SELECT id FROM contacts WHERE email = 'ann@imp1.test'`);
    const csv = csvOf([
      ['title', 'value', 'contact_id', 'status'],
      ['Deal A', '100.5', String(ann.id), 'open'],
      ['Deal B', 'lots', String(ann.id), 'open'],
      ['Deal C', '7', '999999', 'open'],
    ]);
    const deals = await finished(app, auth, (await upload(app, auth, csv, { object: 'deals', mode: 'create' })).body.import.id);
    expect(deals.counts).toMatchObject({ total: 3, created: 1, failed: 2 });
    const dealErrors = (await app.http.get(`/api/imports/${deals.id}/errors`).set('Authorization', auth)).body.errors as {
      row: number;
      column: string | null;
    }[];
    expect(dealErrors.map((e) => [e.row, e.column])).toEqual([
      [2, 'value'],
      [3, 'contact_id'],
    ]);
    const created = await finished(
      app,
      auth,
      (
        await app.http
          .post('/api/imports')
          .set('Authorization', auth)
          .send({ object: 'companies', mode: 'create', rows: [{ name: 'Acme Imports', city: 'Oslo' }, { name: 'Beta Imports' }] })
      ).body.import.id,
    );
    expect(created.counts).toMatchObject({ created: 2, failed: 0 });
    const [acme] = await app.sql<{ id: number }>(`SELECT id FROM companies WHERE name = 'Acme Imports'`);
    const updated = await finished(
      app,
      auth,
      (
        await upload(
          app,
          auth,
          csvOf([
            ['id', 'city'],
            [String(acme.id), 'Bergen'],
            ['999999', 'Nowhere'],
          ]),
          { object: 'companies', mode: 'update' },
        )
      ).body.import.id,
    );
    expect(updated.counts).toMatchObject({ updated: 1, failed: 1 });
    expect((await app.sql<{ city: string }>(`SELECT city FROM companies WHERE id = $1`, [acme.id]))[0].city).toBe('Bergen');
    const exp = await app.http
      .post('/api/exports')
      .set('Authorization', auth)
      .send({ object: 'companies', format: 'csv', fields: ['name', 'city'], filter: 'name[endsWith]:Imports' });
    expect(exp.status).toBe(202);
    const done = await until('the companies export', async () => {
      const g = await app.http.get(`/api/exports/${exp.body.export.id}`).set('Authorization', auth);
      return g.body.export.status === 'completed' ? g.body.export : null;
    });
    const url = new URL(done.download.url as string);
    expect((await app.http.get(`${url.pathname}${url.search}`)).text).toBe('name,city\nAcme Imports,Bergen\nBeta Imports,\n');
  });

  it('export round trip: export every contact, import the file into an empty database, the same contacts', async () => {
    const r = await app.http.post('/api/exports').set('Authorization', auth).send({ object: 'contacts', format: 'csv' });
    const exp = await until('the export', async () => {
      const g = await app.http.get(`/api/exports/${r.body.export.id}`).set('Authorization', auth);
      return g.body.export.status === 'completed' ? g.body.export : null;
    });
    const url = new URL(exp.download.url as string);
    const file = await app.http.get(`${url.pathname}${url.search}`);
    expect(file.status).toBe(200);

    const empty = await startApp({ noRedis: true });
    try {
      const auth2 = await adminToken(empty);
      for (const [label, type] of [
        ['Score', 'number'],
        ['Vip', 'boolean'],
        ['Tags', 'multiselect'],
      ] as const) {
        const body: Record<string, unknown> = { label, type };
        if (type === 'multiselect')
          body.properties = {
            list: [
              { label: 'A', value: 'a' },
              { label: 'B', value: 'b' },
            ],
          };
        expect((await empty.http.post('/api/fields/contact/new').set('Authorization', auth2).send(body)).status).toBe(201);
      }
      const imp = await upload(empty, auth2, file.text, { object: 'contacts', mode: 'upsert' });
      expect(imp.status).toBe(202);
      const done = await finished(empty, auth2, imp.body.import.id);
      expect(done.status).toBe('completed');
      expect(done.counts.failed).toBe(0);
      // Points too: the export's points column sets them on import (a ledger row source import).
      const cols = `name, email, phone, company, title, fields, points`;
      const a = await app.sql(`SELECT ${cols} FROM contacts ORDER BY lower(email)`);
      const b = await empty.sql(`SELECT ${cols} FROM contacts ORDER BY lower(email)`);
      expect(b).toEqual(a);
      expect(b.length).toBe(exp.rows);
    } finally {
      await empty.stop();
    }
  }, 180000);

  it('a token revoked mid-import stops its import within seconds: it ends failed with the reason and nothing is written after', async () => {
    const secret = await app.token('*', { plan: 'enterprise', name: 'revoked mid-import' });
    const [{ id: tokenId }] = await app.sql<{ id: number }>(`SELECT max(id) AS id FROM api_tokens WHERE name = 'revoked mid-import'`);
    const n = 60000;
    const rows = [['name', 'email']];
    for (let i = 0; i < n; i++) rows.push([`V${i}`, `v${i}@revoked.test`]);
    const r = await upload(app, `Bearer ${secret}`, csvOf(rows), { object: 'contacts', mode: 'create' });
    expect(r.status).toBe(202);
    const id = r.body.import.id as number;
    await until('the import to be writing', async () => {
      const imp = (await app.http.get(`/api/imports/${id}`).set('Authorization', auth)).body.import as ImportRecord;
      return imp.counts.processed > 0 ? imp : null;
    });
    const revoke = await app.http.delete(`/api/account/tokens/${tokenId}`).set('Authorization', auth);
    expect(revoke.status).toBe(200);
    const revokedAt = Date.now();
    const imp = await finished(app, auth, id);
    expect(imp.status).toBe('failed');
    expect(imp.error).toBe(`Import ${id} stopped: the token that started it (API token ${tokenId}) was revoked`);
    expect(imp.counts.processed).toBeLessThan(n);
    const [{ finishedAt }] = await app.sql<{ finishedAt: Date }>(`SELECT finished_at AS "finishedAt" FROM imports WHERE id = $1`, [id]);
    expect(new Date(finishedAt).getTime() - revokedAt).toBeLessThan(5000);
    // What is stored is exactly what the committed chunks counted: nothing was written after the import ended.
    await sleep(1500);
    const [{ stored }] = await app.sql<{ stored: string }>(`SELECT count(*)::text AS stored FROM contacts WHERE email LIKE '%@revoked.test'`);
    expect(Number(stored)).toBe(imp.counts.created);
  });

  // Runs after the round trip: the contacts made here have names a spreadsheet would run as formulas.
  it('a file that does not parse (a stray quote) ends the import at once, never retried; a binary upload is a 400, nothing kept', async () => {
    const started = Date.now();
    const quote = await upload(app, auth, 'name,email\nJo "x",jo@imp9.test\n', { object: 'contacts', mode: 'create' });
    expect(quote.status).toBe(202);
    const failed = await finished(app, auth, quote.body.import.id);
    expect(failed.status).toBe('failed');
    expect(failed.error).toMatch(/^The file is not valid CSV near line 2: Invalid Opening Quote/);
    // Ended by its first run: the retries (5 attempts, a 2 s backoff doubling) would take 30 s.
    expect(Date.now() - started).toBeLessThan(15000);

    const before = readdirSync(join(app.env.STORAGE_DIR, 'imports')).length;
    const png = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0x0d, 0x49, 0x48, 0x44, 0x52, 0, 0, 1, 0]);
    const binary = expectError(await upload(app, auth, png, { object: 'contacts', mode: 'create' }), 400, 'validation_failed');
    expect(binary.message).toMatch(/^The file is not a UTF-8 text \(CSV\) file/);
    const nul = expectError(
      await upload(app, auth, Buffer.from('name,email\nJo\u0000,jo@imp9.test\n'), { object: 'contacts', mode: 'create' }),
      400,
      'validation_failed',
    );
    expect(nul.message).toMatch(/NUL byte at byte 13/);
    expectError(await upload(app, auth, Buffer.from('name,city\nJo,Z\xfcrich\n', 'latin1'), { object: 'contacts', mode: 'create' }), 400, 'validation_failed');
    expect(readdirSync(join(app.env.STORAGE_DIR, 'imports')).length).toBe(before);
  });

  it('mapping targets are own properties: constructor, toString, __proto__ are a 400; a file whose only column is toString maps nothing', async () => {
    for (const target of ['constructor', 'toString', 'hasOwnProperty', '__proto__', 'valueOf', 'fields.constructor']) {
      const json = expectError(
        await app.http
          .post('/api/imports')
          .set('Authorization', auth)
          .send({ object: 'contacts', mode: 'create', mapping: { name: target }, rows: [{ name: 'Jo', email: 'jo@imp10.test' }] }),
        400,
        'validation_failed',
      );
      expect(json.details).toEqual([{ field: 'mapping.name', message: expect.stringContaining('is not a writable property of contacts') }]);
      const form = expectError(
        await upload(app, auth, 'name,email\nJo,jo@imp10.test\n', { object: 'contacts', mode: 'create', mapping: JSON.stringify({ name: target }) }),
        400,
        'validation_failed',
      );
      expect(form.details?.[0]).toMatchObject({ field: 'mapping.name' });
    }
    for (const column of ['toString', 'constructor']) {
      const r = await upload(app, auth, `${column}\nJo\n`, { object: 'contacts', mode: 'create' });
      expect(r.status).toBe(202);
      const imp = await finished(app, auth, r.body.import.id);
      expect(imp.status).toBe('failed');
      expect(imp.error).toBe('No column of the file maps to a property');
    }
  });

  it('CSV exports neutralise formula cells (escapeFormulas, default true), numbers stay numbers; so does the import errors CSV', async () => {
    const made = await app.http
      .post('/api/contacts/batch')
      .set('Authorization', auth)
      .send({
        mode: 'create',
        items: [
          { name: '=HYPERLINK("http://evil.test","x")', email: 'f1@imp11.test', phone: '+14155550100', title: '@SUM(1)' },
          { name: '-2+3', email: 'f2@imp11.test', title: '+cmd|/C calc!A0' },
        ],
      });
    expect(made.status).toBeLessThan(300);
    const download = async (body: Record<string, unknown>) => {
      const r = await app.http
        .post('/api/exports')
        .set('Authorization', auth)
        .send({ object: 'contacts', format: 'csv', fields: ['name', 'email', 'phone', 'title'], filter: 'email[endsWith]:@imp11.test', ...body });
      expect(r.status).toBe(202);
      const exp = await until('the export', async () => {
        const g = await app.http.get(`/api/exports/${r.body.export.id}`).set('Authorization', auth);
        return g.body.export.status === 'completed' ? g.body.export : null;
      });
      const url = new URL(exp.download.url as string);
      return { exp, text: (await app.http.get(`${url.pathname}${url.search}`)).text };
    };
    const safe = await download({});
    expect(safe.exp.escapeFormulas).toBe(true);
    expect(safe.text.trim().split('\n')).toEqual([
      'name,email,phone,title',
      `"'=HYPERLINK(""http://evil.test"",""x"")",f1@imp11.test,+14155550100,'@SUM(1)`,
      `'-2+3,f2@imp11.test,,'+cmd|/C calc!A0`,
    ]);
    const exact = await download({ escapeFormulas: false });
    expect(exact.exp.escapeFormulas).toBe(false);
    expect(exact.text.trim().split('\n')).toEqual([
      'name,email,phone,title',
      `"=HYPERLINK(""http://evil.test"",""x"")",f1@imp11.test,+14155550100,@SUM(1)`,
      `-2+3,f2@imp11.test,,+cmd|/C calc!A0`,
    ]);
    expectError(
      await app.http.post('/api/exports').set('Authorization', auth).send({ object: 'contacts', format: 'csv', escapeFormulas: 'no' }),
      400,
      'validation_failed',
    );

    // The errors CSV quotes the file's column names and the messages.
    const imp = await upload(
      app,
      auth,
      csvOf([
        ['name', '=cmd()'],
        ['Jo', 'x'],
      ]),
      { object: 'contacts', mode: 'create', mapping: JSON.stringify({ '=cmd()': 'email' }) },
    );
    expect(imp.status).toBe(202);
    const done = await finished(app, auth, imp.body.import.id);
    expect(done.counts.failed).toBe(1);
    const errorsCsv = await app.http.get(`/api/imports/${done.id}/errors?format=csv`).set('Authorization', auth);
    expect(errorsCsv.text.trim().split('\n').slice(1)).toEqual([expect.stringMatching(/^1,'=cmd\(\),validation_failed,email: /)]);
  });

  it('the OpenAPI document declares the 400s of the import errors and the export download', async () => {
    const doc = (await app.http.get('/api/docs-json')).body as { paths: Record<string, Record<string, { responses: Record<string, unknown> }>> };
    const errors = doc.paths['/api/imports/{id}/errors'].get.responses;
    const download = doc.paths['/api/exports/{id}/download'].get.responses;
    for (const status of ['200', '400', '401', '403', '404', '429', '503']) expect(errors[status]).toBeDefined();
    for (const status of ['200', '400', '401', '404', '429', '503']) expect(download[status]).toBeDefined();
  });

  it('a download the client closes early is logged as an abort, not as a 500 with a stack (export, import errors)', async () => {
    const r = await app.http.post('/api/exports').set('Authorization', auth).send({ object: 'contacts', format: 'csv' });
    const exp = await until('the export', async () => {
      const g = await app.http.get(`/api/exports/${r.body.export.id}`).set('Authorization', auth);
      return g.body.export.status === 'completed' ? g.body.export : null;
    });
    const url = new URL(exp.download.url as string);
    const imp = await app.http
      .post('/api/imports')
      .set('Authorization', auth)
      .send({ object: 'contacts', mode: 'create', rows: [{ email: 'not an email' }] });
    expect(imp.status).toBe(202);
    await finished(app, auth, imp.body.import.id);
    // The signed link takes no token; the errors take one.
    const requests = [
      { path: `${url.pathname}${url.search}`, headers: '' },
      { path: `/api/imports/${imp.body.import.id}/errors?format=csv`, headers: `Authorization: ${auth}\r\n` },
    ];
    for (const { path, headers } of requests) {
      const from = app.logs.length;
      // The client sends the request and closes its connection before the answer comes.
      await new Promise<void>((resolve, reject) => {
        const socket = connect(app.port, '127.0.0.1', () =>
          socket.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n${headers}\r\n`, () => {
            socket.destroy();
            resolve();
          }),
        );
        socket.on('error', reject);
      });
      const pathname = path.split('?')[0];
      const line = await waitUntil(
        `the abort of ${pathname} in the log`,
        async () =>
          app.logs
            .slice(from)
            .join('')
            .split('\n')
            .find((l) => l.includes('request aborted by the client') && l.includes(pathname)),
        15000,
      );
      expect(line).not.toMatch(/stack|"level":"?(error|50)/);
      await sleep(200);
      const after = app.logs.slice(from).join('');
      expect(after).not.toContain('request failed');
      expect(after).not.toContain('ERR_STREAM_PREMATURE_CLOSE');
    }
    // The server still answers.
    expect((await app.http.get(requests[0].path)).status).toBe(200);
  });
});

describe('import worker killed mid-import', () => {
  let api: TestApp;
  let worker: TestApp | null = null;
  let auth: string;
  const env = { JOB_LOCK_MS: '2000', RATE_LIMIT_ENTERPRISE: '1000000', IMPORT_CHUNK_ROWS: '200' };

  beforeAll(async () => {
    api = await startApp({ role: 'api', env });
    worker = await startApp({ role: 'worker', shareWith: api, env });
    auth = await adminToken(api);
  }, 120000);
  afterAll(async () => {
    await worker?.stop();
    await api?.stop();
  });

  it('SIGKILL of the worker mid-import: a new worker resumes from the checkpoint; every row is written once', async () => {
    const n = 12000;
    const rows = [['name', 'email']];
    for (let i = 0; i < n; i++) rows.push([`K${i}`, `k${i}@kill.test`]);
    const r = await upload(api, auth, csvOf(rows), { object: 'contacts', mode: 'create' });
    expect(r.status).toBe(202);
    const id = r.body.import.id as number;
    const midway = await until('the import to be midway', async () => {
      const imp = (await api.http.get(`/api/imports/${id}`).set('Authorization', auth)).body.import as ImportRecord;
      return imp.counts.processed >= 1000 ? imp : null;
    });
    expect(midway.status).toBe('running');
    await worker!.kill('SIGKILL');
    const atKill = (await api.http.get(`/api/imports/${id}`).set('Authorization', auth)).body.import as ImportRecord;
    expect(atKill.counts.processed).toBeLessThan(n);
    worker = await startApp({ role: 'worker', shareWith: api, env });
    const imp = await finished(api, auth, id).catch((e: unknown) => {
      throw new Error(`${String(e)}\nworker: ${worker?.logs.join('').slice(-3000)}\napi: ${api.logs.join('').slice(-2000)}`);
    });
    expect(imp.status).toBe('completed');
    expect(imp.counts).toMatchObject({ total: n, processed: n, created: n, failed: 0 });
    const stored = await api.sql<{ n: string; distinct: string }>(
      `SELECT count(*) AS n, count(DISTINCT lower(email)) AS distinct FROM contacts WHERE email LIKE '%@kill.test'`,
    );
    expect(Number(stored[0].n)).toBe(n);
    expect(Number(stored[0].distinct)).toBe(n);
    // One contact.created event per row: the killed chunk's writes were rolled back with its checkpoint.
    const events = await api.sql<{ n: string }>(`SELECT count(*) AS n FROM events WHERE type = 'contact.created' AND data->>'email' LIKE '%@kill.test'`);
    expect(Number(events[0].n)).toBe(n);
  }, 180000);

  it('a worker that dies at every run: after 5 runs the import ends failed with the reason, not queued again forever; an export too', async () => {
    const n = 40000;
    const rows = [['name', 'email']];
    for (let i = 0; i < n; i++) rows.push([`P${i}`, `p${i}@poison.test`]);
    const r = await upload(api, auth, csvOf(rows), { object: 'contacts', mode: 'create' });
    expect(r.status).toBe(202);
    const id = r.body.import.id as number;
    const runs = async () => (await api.sql<{ runs: number }>(`SELECT runs FROM imports WHERE id = $1`, [id]))[0].runs;
    // Each run is killed as soon as it has taken the import up (BullMQ's stalled-job check or the recovery sweep runs it again).
    for (let run = 1; run <= 5; run++) {
      await until(`run ${run} to take the import up`, async () => (await runs()) >= run);
      await worker!.kill('SIGKILL');
      worker = await startApp({ role: 'worker', shareWith: api, env });
    }
    const imp = await finished(api, auth, id).catch((e: unknown) => {
      throw new Error(`${String(e)}\nworker: ${worker?.logs.join('').slice(-3000)}`);
    });
    expect(imp).toMatchObject({ status: 'failed', error: 'stopped after 5 attempts: the worker died each time' });
    expect(imp.counts.processed).toBeLessThan(n);
    expect(await runs()).toBe(6);

    // An export whose five runs died (arranged while no worker runs): the recovery's next run ends it failed.
    await worker!.stop();
    worker = null;
    const e = await api.http.post('/api/exports').set('Authorization', auth).send({ object: 'contacts', format: 'csv' });
    expect(e.status).toBe(202);
    const exportId = e.body.export.id as number;
    await api.sql(`UPDATE exports SET runs = 5, status = 'running' WHERE id = $1`, [exportId]);
    worker = await startApp({ role: 'worker', shareWith: api, env });
    const exp = await until('the export to end', async () => {
      const x = (await api.http.get(`/api/exports/${exportId}`).set('Authorization', auth)).body.export;
      return ['completed', 'failed'].includes(x.status) ? x : null;
    });
    expect(exp).toMatchObject({ status: 'failed', error: 'stopped after 5 attempts: the worker died each time', download: null });
  }, 240000);
});

describe('jobs acting for a token that is revoked (API and worker processes)', () => {
  let api: TestApp;
  let worker: TestApp | null = null;
  let auth: string;
  // Broadcasts at 20 messages a second, so that one is still sending when its token is revoked.
  const env = { JOB_LOCK_MS: '2000', RATE_LIMIT_ENTERPRISE: '1000000', SMS_PROVIDER: 'log', SMS_MAX_PER_SECOND: '20' };

  beforeAll(async () => {
    api = await startApp({ role: 'api', env });
    worker = await startApp({ role: 'worker', shareWith: api, env });
    auth = await adminToken(api);
  }, 120000);
  afterAll(async () => {
    await worker?.stop();
    await api?.stop();
  });

  async function revocable(name: string): Promise<{ bearer: string; id: number }> {
    const secret = await api.token('*', { plan: 'enterprise', name });
    const [{ id }] = await api.sql<{ id: number }>(`SELECT max(id) AS id FROM api_tokens WHERE name = $1`, [name]);
    return { bearer: `Bearer ${secret}`, id };
  }
  const revoke = async (id: number) => expect((await api.http.delete(`/api/account/tokens/${id}`).set('Authorization', auth)).status).toBe(200);

  it('a broadcast whose token is revoked mid-send is canceled within seconds; its unsent messages say why', async () => {
    const n = 400;
    await api.sql(
      `INSERT INTO contacts (name, email, phone) SELECT 'B' || i, 'b' || i || '@revoked-bcast.test', '+1415555' || lpad(i::text, 4, '0') FROM generate_series(1, ${n}) i`,
    );
    const ids = (await api.sql<{ id: number }>(`SELECT id FROM contacts WHERE email LIKE '%@revoked-bcast.test' ORDER BY id`)).map((c) => c.id);
    const token = await revocable('revoked mid-broadcast');
    const created = await api.http
      .post('/api/text-messages/broadcasts')
      .set('Authorization', token.bearer)
      .send({ content: 'Hi {{contact.name}}', audience: { contactIds: ids } });
    expect(created.status).toBe(201);
    const id = created.body.broadcast.id as number;
    expect((await api.http.post(`/api/text-messages/broadcasts/${id}/send`).set('Authorization', token.bearer)).status).toBe(202);
    const get = async () => (await api.http.get(`/api/text-messages/broadcasts/${id}`).set('Authorization', auth)).body.broadcast;
    await until('some messages to be sent', async () => ((await get()).counts.sent + (await get()).counts.delivered > 0 ? true : null));
    await revoke(token.id);
    const revokedAt = Date.now();
    const b = await until(
      'the broadcast to be canceled',
      async () => {
        const x = await get();
        return x.status === 'canceled' ? x : null;
      },
      15000,
    );
    expect(Date.now() - revokedAt).toBeLessThan(5000);
    expect(b.counts.canceled).toBeGreaterThan(0);
    const reasons = await api.sql<{ failure_reason: string }>(
      `SELECT DISTINCT failure_reason FROM text_messages WHERE broadcast_id = $1 AND status = 'canceled'`,
      [id],
    );
    expect(reasons.map((r) => r.failure_reason)).toEqual([
      `the broadcast was canceled: stopped: the token that started it (API token ${token.id}) was revoked`,
    ]);
    // The batch a lane had claimed (about a second's worth) finishes, as with a cancel; nothing after it.
    const settled = await until(
      'the claimed batch to finish',
      async () => {
        const x = await get();
        return x.counts.queued === 0 ? x : null;
      },
      15000,
    );
    const sentThen = settled.counts.sent + settled.counts.delivered;
    expect(sentThen + settled.counts.canceled).toBe(n);
    await sleep(1500);
    const later = await get();
    expect(later.counts.sent + later.counts.delivered).toBe(sentThen);
  });

  it('an export whose token was revoked before the worker took it up ends failed with the reason', async () => {
    await worker!.stop();
    worker = null;
    const token = await revocable('revoked before export');
    const r = await api.http.post('/api/exports').set('Authorization', token.bearer).send({ object: 'contacts', format: 'csv' });
    expect(r.status).toBe(202);
    const id = r.body.export.id as number;
    await revoke(token.id);
    worker = await startApp({ role: 'worker', shareWith: api, env });
    const exp = await until('the export to end', async () => {
      const e = (await api.http.get(`/api/exports/${id}`).set('Authorization', auth)).body.export;
      return ['completed', 'failed'].includes(e.status) ? e : null;
    });
    expect(exp).toMatchObject({
      status: 'failed',
      error: `Export ${id} stopped: the token that started it (API token ${token.id}) was revoked`,
      download: null,
    });
  });
});
