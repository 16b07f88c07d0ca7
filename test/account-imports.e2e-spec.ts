/**
 * Importing from the console over HTTP: a CSV uploaded (multipart, its CSRF token checked before
 * the file is stored), its columns mapped on the next page (the header detected from the file,
 * the API's validation next to each field), the import started once however many times the form
 * is posted at once, and followed on its page (progress as JSON for the page's script). Forged
 * uploads (no token, a wrong one, the token after the file, another origin) are refused with
 * nothing left in storage. Uploads not mapped within a day are removed with their files (the
 * server's clock moved, not slept through). The browser suite drives the same pages in Chromium.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { startApp, type TestApp } from './support/app.js';
import { browse, csrfOf, Jar, setPassword, signIn } from './support/console.js';
import { bearer } from './support/fixtures.js';
import { testClock } from './support/clock.js';
import { waitUntil } from './support/wait.js';

const PASSWORD = 'a long and happy passphrase';
const EMAIL = 'olga@example.com';

const CSV = [
  'Full Name,E-mail,Score,Notes',
  'Ann Lee,ann@up.test,12,first',
  'Bob Ray,not an email,3,',
  'Cy Dow,cy@up.test,twelve,',
  'Di Fox,di@up.test,7,x',
].join('\n');

describe('account console: importing a CSV through the upload and mapping forms; workflows', () => {
  let app: TestApp;
  let jar: Jar;
  const clock = testClock();

  beforeAll(async () => {
    app = await startApp({ env: { RATE_LIMIT_ANONYMOUS: '100000', ...clock.env } });
    const auth = bearer(await app.token('*', { user: EMAIL, plan: 'enterprise', name: 'Setup' }));
    const f = await fetch(`${app.url}/api/fields/contact/new`, {
      method: 'POST',
      headers: { Authorization: auth, 'Content-Type': 'application/json' },
      body: JSON.stringify({ label: 'Score', type: 'number' }),
    });
    expect(f.status).toBe(201);
    expect((await setPassword(app, EMAIL, PASSWORD)).code).toBe(0);
    jar = new Jar();
    expect((await signIn(app, jar, EMAIL, PASSWORD)).status).toBe(303);
  }, 120_000);
  afterAll(async () => app?.stop());

  const storedFiles = () => readdirSync(join(app.env.STORAGE_DIR, 'imports')).length;
  const uploadRows = async () => Number((await app.sql<{ n: string }>(`SELECT count(*) AS n FROM console_import_uploads`))[0].n);

  /** Posts the upload form as a browser does: the fields in the given order (the file where `file` is named). */
  async function upload(fields: [string, string][], headers: Record<string, string> = {}, who = jar) {
    const body = new FormData();
    for (const [k, v] of fields) {
      if (k === 'file') body.append('file', new Blob([v], { type: 'text/csv' }), 'people.csv');
      else body.append(k, v);
    }
    const res = await fetch(`${app.url}/account/imports/upload`, {
      method: 'POST',
      redirect: 'manual',
      headers: { Accept: 'text/html', Cookie: who.header(), ...headers },
      body,
    });
    return { status: res.status, location: res.headers.get('location'), html: await res.text() };
  }
  const token = async (who = jar) => csrfOf((await browse(app, who, '/account/imports')).html);

  let mappingPath = '';

  it('the upload form posts the CSV; the mapping form lists its header, proposing the properties and custom fields the columns are named for', async () => {
    const page = await browse(app, jar, '/account/imports');
    expect(page.status).toBe(200);
    // The token is the form's first field: the server checks it before it stores the file.
    expect(page.html).toMatch(/enctype="multipart\/form-data"[^>]*>\s*<input type="hidden" name="_csrf"/);
    const up = await upload([
      ['_csrf', csrfOf(page.html)],
      ['object', 'contacts'],
      ['file', CSV],
    ]);
    expect(up.status).toBe(303);
    expect(up.location).toMatch(/^\/account\/imports\/uploads\/\d+$/);
    mappingPath = up.location!;
    const form = await browse(app, jar, mappingPath);
    expect(form.status).toBe(200);
    const columns = [...form.html.matchAll(/<label for="col(\d+)">([^<]*)<\/label>/g)].map((m) => m[2]);
    expect(columns).toEqual(['Full Name', 'E-mail', 'Score', 'Notes']);
    const selected = (i: number) => new RegExp(`<select id="col${i}"[^]*?<option value="([^"]+)" selected>`).exec(form.html)?.[1];
    // "Full Name" and "Notes" name no target; "E-mail" is email; "Score" the custom field.
    expect([0, 1, 2, 3].map(selected)).toEqual(['ignore', 'email', 'fields.score', 'ignore']);
    expect(form.html).toContain('<option value="fields.score"');
    expect(form.html).toContain('<option value="name"');
  });

  it('refuses a forged upload (no token, a wrong one, the token after the file, another origin) with 403 and stores nothing', async () => {
    const before = { files: storedFiles(), rows: await uploadRows() };
    const good = await token();
    const attempts = [
      await upload([
        ['object', 'contacts'],
        ['file', CSV],
      ]),
      await upload([
        ['_csrf', 'x'.repeat(43)],
        ['object', 'contacts'],
        ['file', CSV],
      ]),
      await upload([
        ['object', 'contacts'],
        ['file', CSV],
        ['_csrf', good],
      ]),
      await upload(
        [
          ['_csrf', good],
          ['object', 'contacts'],
          ['file', CSV],
        ],
        { Origin: 'https://evil.example', 'Sec-Fetch-Site': 'cross-site' },
      ),
      // No file at all: the token is checked once the fields are read.
      await upload([['object', 'contacts']]),
    ];
    expect(attempts.map((a) => a.status)).toEqual([403, 403, 403, 403, 403]);
    expect({ files: storedFiles(), rows: await uploadRows() }).toEqual(before);
    // Without a session: the sign-in page, nothing read.
    const anonymous = await upload(
      [
        ['_csrf', good],
        ['object', 'contacts'],
        ['file', CSV],
      ],
      {},
      new Jar(),
    );
    expect([anonymous.status, anonymous.location]).toEqual([303, '/account/login']);
    expect({ files: storedFiles(), rows: await uploadRows() }).toEqual(before);
  });

  it('a bad upload is answered on the form, next to its field, and keeps no file', async () => {
    const before = storedFiles();
    const missing = await upload([
      ['_csrf', await token()],
      ['object', 'contacts'],
    ]);
    expect(missing.status).toBe(400);
    expect(missing.html).toMatch(/id="file-error" class="field-error">choose a CSV file/);
    const binary = await upload([
      ['_csrf', await token()],
      ['object', 'contacts'],
      ['file', 'a,b\n\u0000\u0001'],
    ]);
    expect(binary.status).toBe(400);
    expect(binary.html).toMatch(/id="file-error" class="field-error">[^<]*NUL byte/);
    const object = await upload([
      ['_csrf', await token()],
      ['object', 'planets'],
      ['file', CSV],
    ]);
    expect(object.status).toBe(400);
    expect(object.html).toMatch(/id="object-error" class="field-error">must be one of contacts, companies, deals/);
    const twice = await upload([
      ['_csrf', await token()],
      ['object', 'contacts'],
      ['file', 'email,email\na@b.test,c@d.test'],
    ]);
    expect(twice.status).toBe(400);
    expect(twice.html).toMatch(/id="file-error" class="field-error">its header names the column &quot;email&quot; twice/);
    expect(storedFiles()).toBe(before);
  });

  it("the mapping form shows the API's validation next to the column and keeps what was chosen", async () => {
    const page = await browse(app, jar, mappingPath);
    const post = (values: Record<string, string>) => browse(app, jar, mappingPath, { _csrf: csrfOf(page.html), ...values });
    const bad = await post({ mode: 'upsert', emptyValues: 'ignore', col0: 'name', col1: 'email', col2: 'fields.nope', col3: 'ignore' });
    expect(bad.status).toBe(400);
    expect(bad.html).toMatch(/id="col2-error" class="field-error">&quot;fields.nope&quot; is not a writable property of contacts/);
    expect(bad.html).toMatch(/<select id="col0"[^]*?<option value="name" selected>/);
    const noMode = await post({ emptyValues: 'ignore', col0: 'name', col1: 'email' });
    expect(noMode.status).toBe(400);
    expect(noMode.html).toMatch(/id="mode-error" class="field-error">/);
    // Another user's upload is not theirs to see or start.
    expect((await app.cli(['user:create', '--email', 'pia@example.com', '--name', 'Pia'])).code).toBe(0);
    expect((await setPassword(app, 'pia@example.com', PASSWORD)).code).toBe(0);
    const pia = new Jar();
    expect((await signIn(app, pia, 'pia@example.com', PASSWORD)).status).toBe(303);
    expect((await browse(app, pia, mappingPath)).status).toBe(404);
    const piaToken = csrfOf((await browse(app, pia, '/account/imports')).html);
    expect((await browse(app, pia, mappingPath, { _csrf: piaToken, mode: 'create', col0: 'name' })).status).toBe(404);
    // A post from another origin changes nothing.
    const cross = await browse(
      app,
      jar,
      mappingPath,
      { _csrf: csrfOf(page.html), mode: 'create', col0: 'name', col1: 'email' },
      { Origin: 'https://evil.example', 'Sec-Fetch-Site': 'cross-site' },
    );
    expect(cross.status).toBe(403);
    expect(await app.sql(`SELECT id FROM imports`)).toEqual([]);
  });

  it('parallel posts of the mapping form start one import; the import runs with its row errors, its progress as JSON', async () => {
    const page = await browse(app, jar, mappingPath);
    const values = { _csrf: csrfOf(page.html), mode: 'upsert', emptyValues: 'ignore', col0: 'name', col1: 'email', col2: 'fields.score', col3: 'ignore' };
    const answers = await Promise.all(Array.from({ length: 6 }, () => browse(app, jar, mappingPath, values)));
    const started = answers.filter((a) => a.status === 303).map((a) => a.location);
    expect(started.length).toBeGreaterThanOrEqual(1);
    // The others met it being started (409) or found it started (303 to the same import).
    expect(answers.every((a) => a.status === 303 || a.status === 409)).toBe(true);
    expect(new Set(started).size).toBe(1);
    const imports = await app.sql<{ id: number }>(`SELECT id FROM imports`);
    expect(imports).toHaveLength(1);
    const id = imports[0].id;
    expect(started[0]).toBe(`/account/imports/${id}`);
    // Posted again, or opened again, the form leads to the import.
    expect((await browse(app, jar, mappingPath)).location).toBe(`/account/imports/${id}`);
    expect((await browse(app, jar, mappingPath, values)).location).toBe(`/account/imports/${id}`);
    const progress = await waitUntil(
      'import ended',
      async () => {
        const r = await fetch(`${app.url}/account/imports/${id}/progress`, { headers: { Cookie: jar.header(), Accept: 'application/json' } });
        expect(r.status).toBe(200);
        const p = (await r.json()) as { status: string; progress: number; counts: Record<string, number | null> };
        return p.status === 'completed' ? p : null;
      },
      30_000,
    );
    expect(progress).toEqual({ status: 'completed', progress: 100, counts: { total: 4, processed: 4, created: 2, updated: 0, skipped: 0, failed: 2 } });
    const done = await browse(app, jar, `/account/imports/${id}`);
    expect(done.html).toContain('Download all 2 errors as CSV');
    expect(done.html).not.toContain('data-progress=');
    const csv = await browse(app, jar, `/account/imports/${id}/errors.csv`);
    expect(
      csv.html
        .trim()
        .split('\n')
        .map((l) => l.split(',').slice(0, 2).join(',')),
    ).toEqual(['row,column', '2,E-mail', '3,Score']);
    const people = await app.sql<{ name: string; fields: Record<string, unknown> }>(
      `SELECT name, fields FROM contacts WHERE email LIKE '%@up.test' ORDER BY name`,
    );
    expect(people).toEqual([
      { name: 'Ann Lee', fields: { score: 12 } },
      { name: 'Di Fox', fields: { score: 7 } },
    ]);
  });

  it('an upload not mapped within a day is removed with its file when the next one comes', async () => {
    const up = await upload([
      ['_csrf', await token()],
      ['object', 'contacts'],
      ['file', 'email\nold@up.test'],
    ]);
    expect(up.status).toBe(303);
    const keyOf = async (path: string) =>
      (await app.sql<{ k: string }>(`SELECT storage_key AS k FROM console_import_uploads WHERE id = $1`, [Number(path.split('/').pop())]))[0]?.k;
    const oldKey = await keyOf(up.location!);
    expect(existsSync(join(app.env.STORAGE_DIR, oldKey))).toBe(true);
    clock.travel(25 * 3600_000);
    // A day later the session has ended: sign in again.
    jar = new Jar();
    expect((await signIn(app, jar, EMAIL, PASSWORD)).status).toBe(303);
    const next = await upload([
      ['_csrf', await token()],
      ['object', 'contacts'],
      ['file', 'email\nnew@up.test'],
    ]);
    expect(next.status).toBe(303);
    expect((await browse(app, jar, up.location!)).status).toBe(404);
    expect((await browse(app, jar, next.location!)).status).toBe(200);
    // The old upload's row and file went; the new one's are there.
    expect(existsSync(join(app.env.STORAGE_DIR, oldKey))).toBe(false);
    expect(existsSync(join(app.env.STORAGE_DIR, await keyOf(next.location!)))).toBe(true);
  });

  it('workflows: the list and a workflow with its graph; parallel pause posts pause it once (409 for the rest), resume only from paused', async () => {
    const auth = bearer(await app.token('*', { user: EMAIL, plan: 'enterprise', name: 'Workflows' }));
    const created = await fetch(`${app.url}/api/workflows`, {
      method: 'POST',
      headers: { Authorization: auth, 'Content-Type': 'application/json' },
      body: JSON.stringify({
        name: 'Drip <b>one</b>',
        status: 'active',
        trigger: { type: 'manual' },
        steps: [
          { key: 'wait', type: 'wait', duration: '3d', next: 'end' },
          { key: 'end', type: 'exit' },
        ],
      }),
    });
    expect(created.status).toBe(201);
    const id = ((await created.json()) as { workflow: { id: number } }).workflow.id;
    const list = await browse(app, jar, '/account/workflows');
    expect(list.status).toBe(200);
    expect(list.html).toContain(`<a href="/account/workflows/${id}">Drip &lt;b&gt;one&lt;/b&gt;</a>`);
    expect(list.html).toContain('<a href="/account/workflows" aria-current="page">Workflows</a>');
    const page = await browse(app, jar, `/account/workflows/${id}`);
    expect(page.status).toBe(200);
    expect(page.html).toMatch(/<svg class="workflow-graph"[^>]*role="img"/);
    expect([...page.html.matchAll(/<g class="step step-(\w+)" data-step="(\w+)" data-waiting="0" data-completed="0"/g)].map((m) => m.slice(1))).toEqual([
      ['wait', 'wait'],
      ['exit', 'end'],
    ]);
    expect(page.html).not.toMatch(/<script(?! src="\/account\/assets\/account\.js")/);
    const pauses = await Promise.all(Array.from({ length: 5 }, () => browse(app, jar, `/account/workflows/${id}/pause`, { _csrf: csrfOf(page.html) })));
    expect(pauses.map((p) => p.status).sort()).toEqual([303, 409, 409, 409, 409]);
    expect(await app.sql(`SELECT status FROM workflows WHERE id = $1`, [id])).toEqual([{ status: 'paused' }]);
    const paused = await browse(app, jar, `/account/workflows/${id}?done=paused`);
    expect(paused.html).toContain('role="status">The workflow is paused');
    expect(paused.html).toContain(`action="/account/workflows/${id}/resume"`);
    // Pausing again, or posting from another origin, changes nothing.
    expect((await browse(app, jar, `/account/workflows/${id}/pause`, { _csrf: csrfOf(page.html) })).status).toBe(409);
    const cross = await browse(
      app,
      jar,
      `/account/workflows/${id}/resume`,
      { _csrf: csrfOf(page.html) },
      { Origin: 'https://evil.example', 'Sec-Fetch-Site': 'cross-site' },
    );
    expect(cross.status).toBe(403);
    expect((await browse(app, jar, `/account/workflows/${id}/resume`, { _csrf: 'forged' })).status).toBe(403);
    expect(await app.sql(`SELECT status FROM workflows WHERE id = $1`, [id])).toEqual([{ status: 'paused' }]);
    const resumed = await browse(app, jar, `/account/workflows/${id}/resume`, { _csrf: csrfOf(page.html) });
    expect([resumed.status, resumed.location]).toEqual([303, `/account/workflows/${id}?done=resumed`]);
    expect(await app.sql(`SELECT status FROM workflows WHERE id = $1`, [id])).toEqual([{ status: 'active' }]);
    expect((await browse(app, jar, '/account/workflows/999999')).status).toBe(404);
    for (const path of ['/account/workflows', `/account/workflows/${id}`, '/account/imports', mappingPath]) {
      const r = await browse(app, new Jar(), path);
      expect([path, r.status, r.location]).toEqual([path, 303, '/account/login']);
    }
  });
});
