import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { expectError, startApp, type TestApp } from './support/app.js';
import { tokenFor } from './support/fixtures.js';
import { waitUntil } from './support/wait.js';

/** The README's zero-dependency mode: no DATABASE_URL (embedded PGlite), no REDIS_URL. */
describe('embedded mode', () => {
  let app: TestApp;
  let auth: string;

  beforeAll(async () => {
    app = await startApp({ embedded: true });
    // The CLI runs while the server owns the data directory: it goes through the server's socket.
    auth = await tokenFor(app, '*', { plan: 'basic' });
  });
  afterAll(async () => app?.stop());

  it('reports the embedded database and in-process queue', async () => {
    const res = await app.http.get('/health');
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ embeddedDatabase: true, database: { status: 'up' }, redis: { status: 'disabled' }, queue: { mode: 'in-process' } });
    expect(existsSync(join(app.env.DATA_DIR, 'postgres', 'pgdata'))).toBe(true);
  });

  it('creates, lists, searches, edits and deletes contacts', async () => {
    const created = await app.http
      .post('/api/contacts/new')
      .set('Authorization', auth)
      .send({ name: 'Embedded Ed', email: 'ed@embedded.test', company: 'Wasm Works' });
    expect(created.status).toBe(201);
    const id = created.body.contact.id;
    const found = await app.http.get('/api/contacts').query({ search: 'wasm' }).set('Authorization', auth);
    expect(found.body).toMatchObject({ total: 1, contacts: [{ id }] });
    const edited = await app.http.patch(`/api/contacts/${id}/edit`).set('Authorization', auth).send({ title: 'CTO' });
    expect(edited.body.contact.title).toBe('CTO');
    expectError(await app.http.post('/api/contacts/new').set('Authorization', auth).send({ name: 'Dup', email: 'ED@embedded.test' }), 409, 'conflict');
    expect((await app.http.delete(`/api/contacts/${id}/delete`).set('Authorization', auth)).status).toBe(200);
    expect((await app.http.get('/api/contacts').set('Authorization', auth)).body.total).toBe(0);
  });

  it('builds a dynamic segment and keeps it fresh (the refresher runs in process on the one-session database)', async () => {
    const contact = await app.http.post('/api/contacts/new').set('Authorization', auth).send({ name: 'Seg Sam', email: 'sam@embedded.test', title: 'CEO' });
    expect(contact.status).toBe(201);
    const created = await app.http.post('/api/segments').set('Authorization', auth).send({ name: 'CEOs', type: 'dynamic', filter: 'title[eq]:CEO' });
    expect(created.status).toBe(201);
    const id = created.body.segment.id as number;
    const count = async () => (await app.http.get(`/api/segments/${id}/count`).set('Authorization', auth)).body as { count: number; status: string };
    await waitUntil('segment built', async () => ((await count()).status === 'ready' ? true : undefined), 20000);
    expect(await count()).toEqual({ count: 1, status: 'ready' });
    await app.http
      .patch(`/api/contacts/${contact.body.contact.id as number}`)
      .set('Authorization', auth)
      .send({ title: 'CFO' });
    await waitUntil('contact left the segment', async () => ((await count()).count === 0 ? true : undefined), 20000);
    expect((await app.http.delete(`/api/contacts/${contact.body.contact.id as number}`).set('Authorization', auth)).status).toBe(200);
    expect((await app.http.delete(`/api/segments/${id}`).set('Authorization', auth)).status).toBe(200);
  });

  it('limits requests in memory and still sends the headers', async () => {
    const res = await app.http.get('/api/contacts').set('Authorization', auth);
    expect(res.headers['x-ratelimit-limit']).toBe('1000');
    expect(Number(res.headers['x-ratelimit-remaining'])).toBeLessThan(1000);
  });

  it('keeps its data across a restart, and the CLI works on the stopped data directory', async () => {
    await app.http.post('/api/contacts/new').set('Authorization', auth).send({ name: 'Persistent Pat', email: 'pat@embedded.test' });
    const code = await app.kill('SIGTERM');
    expect(code).toBe(0);
    // The data directory is free now: the CLI opens it itself.
    const list = await app.cli(['user:list']);
    expect(list.code).toBe(0);
    expect(list.stdout).toContain('admin@example.com');
    const again = await startApp({ embedded: true, env: { DATA_DIR: app.env.DATA_DIR, STORAGE_DIR: app.env.STORAGE_DIR } });
    try {
      const res = await again.http.get('/api/contacts').query({ search: 'persistent' }).set('Authorization', auth);
      expect(res.status).toBe(200);
      expect(res.body.total).toBe(1);
    } finally {
      await again.kill('SIGTERM');
    }
  });
});
