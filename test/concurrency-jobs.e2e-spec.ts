/**
 * Concurrency and hostile download addresses for assets, reports and text messages, through HTTP against the built server:
 * parallel edits of different properties of one record all survive; of parallel deletes of
 * one record exactly one answers 200 and the others 404; generated asset aliases never
 * answer 409 under concurrency; a download address holding NUL is a 404, never a 500 or an
 * error-level log.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startApp, type TestApp } from './support/app.js';
import { adminToken } from './support/fixtures.js';

const ROUNDS = 5;
const DELETERS = 10;

function multipart(fields: Record<string, string>, file?: { name: string; data: Buffer }) {
  const boundary = '----sfConcurrencyBoundary2c9f';
  const parts: Buffer[] = [];
  for (const [k, v] of Object.entries(fields)) parts.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${k}"\r\n\r\n${v}\r\n`, 'utf8'));
  if (file) {
    parts.push(
      Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${file.name}"\r\nContent-Type: application/octet-stream\r\n\r\n`),
      file.data,
      Buffer.from('\r\n'),
    );
  }
  parts.push(Buffer.from(`--${boundary}--\r\n`));
  return { contentType: `multipart/form-data; boundary=${boundary}`, body: Buffer.concat(parts) };
}

const statuses = (rs: { status: number }[]) => rs.map((r) => r.status).sort((a, b) => a - b);

describe('concurrency: assets, reports, text messages', () => {
  let app: TestApp;
  let auth: string;
  let campaignId: number;

  beforeAll(async () => {
    app = await startApp();
    auth = await adminToken(app);
    const c = await app.http.post('/api/campaigns/new').set('Authorization', auth).send({ name: 'Concurrency campaign' });
    expect(c.status).toBe(201);
    campaignId = c.body.campaign.id;
  }, 120000);
  afterAll(async () => {
    await app?.stop();
  });

  const upload = (fields: Record<string, string>, name = 'f.txt') => {
    const { contentType, body } = multipart(fields, { name, data: Buffer.from(`content of ${name}`) });
    return app.http.post('/api/assets/new').set('Authorization', auth).set('Content-Type', contentType).send(body);
  };

  describe('assets', () => {
    it('parallel PATCHes of different properties all survive', async () => {
      for (let round = 0; round < ROUNDS; round++) {
        const a = await upload({ title: `Concurrent asset ${round}` });
        expect(a.status).toBe(201);
        const id = a.body.asset.id;
        const changes = [
          { description: `d${round}` },
          { language: 'fr' },
          { isPublished: false },
          { title: `Renamed ${round}` },
          { publishUp: '2020-01-01T00:00:00Z' },
          { alias: `concurrent-alias-${round}` },
        ];
        const res = await Promise.all(changes.map((c) => app.http.patch(`/api/assets/${id}`).set('Authorization', auth).send(c)));
        expect(statuses(res)).toEqual(changes.map(() => 200));
        const after = (await app.http.get(`/api/assets/${id}`).set('Authorization', auth)).body.asset;
        expect(after).toMatchObject({
          description: `d${round}`,
          language: 'fr',
          isPublished: false,
          title: `Renamed ${round}`,
          publishUp: '2020-01-01T00:00:00+00:00',
          alias: `concurrent-alias-${round}`,
        });
      }
    });

    it('parallel DELETEs: one 200, the rest 404', async () => {
      const id = (await upload({ title: 'Delete me concurrently' })).body.asset.id;
      const res = await Promise.all(Array.from({ length: DELETERS }, () => app.http.delete(`/api/assets/${id}`).set('Authorization', auth)));
      expect(statuses(res)).toEqual([200, ...Array(DELETERS - 1).fill(404)]);
    });

    it('generated aliases never collide into a 409: parallel uploads and PUTs without an alias', async () => {
      const created = await Promise.all(Array.from({ length: 12 }, (_, i) => upload({ title: 'Same generated title' }, `g${i}.txt`)));
      expect(statuses(created)).toEqual(created.map(() => 201));
      expect(new Set(created.map((r) => r.body.asset.alias)).size).toBe(12);

      // PUT regenerates the alias from the (new) title when none is sent.
      const others = await Promise.all(Array.from({ length: 8 }, (_, i) => upload({ title: `Put base ${i}` }, `p${i}.txt`)));
      const put = await Promise.all(
        others.map((o) => app.http.put(`/api/assets/${o.body.asset.id}`).set('Authorization', auth).send({ title: 'Put to one title' })),
      );
      expect(statuses(put)).toEqual(put.map(() => 200));
      const aliases = put.map((r) => r.body.asset.alias as string);
      expect(new Set(aliases).size).toBe(8);
      for (const a of aliases) expect(a).toMatch(/^put-to-one-title(-\d+)?$/);
    });

    it('a download address holding NUL is a 404 without an error-level log', async () => {
      const a = (await upload({ title: 'Nul target' })).body.asset;
      const errorsBefore = app.logs
        .join('')
        .split('\n')
        .filter((l) => l.includes('"level":"error"')).length;
      for (const path of ['/api/assets/1:x%00', `/api/assets/${a.id}:${a.alias}%00`, '/api/assets/1:%00', `/api/assets/${a.id}:%00${a.alias}`]) {
        const res = await app.http.get(path);
        expect(res.status).toBe(404);
        expect(res.body.error).toMatchObject({ code: 'not_found', status: 404 });
      }
      // The asset itself is still served.
      expect((await app.http.get(`/api/assets/${a.id}:${a.alias}`)).status).toBe(200);
      await new Promise((r) => setTimeout(r, 200));
      const errorsAfter = app.logs
        .join('')
        .split('\n')
        .filter((l) => l.includes('"level":"error"')).length;
      expect(errorsAfter).toBe(errorsBefore);
    });
  });

  describe('reports', () => {
    it('parallel PATCHes of different properties all survive', async () => {
      for (let round = 0; round < ROUNDS; round++) {
        const r = await app.http
          .post('/api/reports/new')
          .set('Authorization', auth)
          .send({ name: `Report ${round}`, type: 'sales' });
        expect(r.status).toBe(201);
        const id = r.body.report.id;
        const changes = [
          { name: `Renamed report ${round}` },
          { description: `about ${round}` },
          { isPublished: false },
          { columns: ['product', 'revenue'] },
          { filters: { dateRange: 'last_7_days' } },
        ];
        const res = await Promise.all(changes.map((c) => app.http.patch(`/api/reports/${id}`).set('Authorization', auth).send(c)));
        expect(statuses(res)).toEqual(changes.map(() => 200));
        const after = (await app.http.get(`/api/reports/${id}`).set('Authorization', auth)).body.report;
        expect(after).toMatchObject({
          name: `Renamed report ${round}`,
          description: `about ${round}`,
          isPublished: false,
          columns: ['product', 'revenue'],
          filters: { dateRange: 'last_7_days' },
        });
      }
    });

    it('parallel DELETEs: one 200, the rest 404', async () => {
      const id = (await app.http.post('/api/reports/new').set('Authorization', auth).send({ name: 'Delete me', type: 'marketing' })).body.report.id;
      const res = await Promise.all(Array.from({ length: DELETERS }, () => app.http.delete(`/api/reports/${id}`).set('Authorization', auth)));
      expect(statuses(res)).toEqual([200, ...Array(DELETERS - 1).fill(404)]);
    });
  });

  describe('text messages', () => {
    it('parallel PATCHes of different properties all survive', async () => {
      for (let round = 0; round < ROUNDS; round++) {
        const t = await app.http.post('/api/text-messages/new').set('Authorization', auth).send({ content: 'first', recipient: '+14155550100' });
        expect(t.status).toBe(201);
        const id = t.body.textMessage.id;
        const changes = [{ content: `hello ${round}` }, { recipient: '+14155550199' }, { campaignId }];
        const res = await Promise.all(changes.map((c) => app.http.patch(`/api/text-messages/${id}`).set('Authorization', auth).send(c)));
        expect(statuses(res)).toEqual(changes.map(() => 200));
        const after = (await app.http.get(`/api/text-messages/${id}`).set('Authorization', auth)).body.textMessage;
        expect(after).toMatchObject({ content: `hello ${round}`, recipient: '+14155550199', campaign: { id: campaignId }, status: 'draft' });
      }
    });

    it('parallel DELETEs: one 200, the rest 404', async () => {
      for (let round = 0; round < 3; round++) {
        const id = (await app.http.post('/api/text-messages/new').set('Authorization', auth).send({ content: 'bye', recipient: '+14155550100' })).body
          .textMessage.id;
        const res = await Promise.all(Array.from({ length: DELETERS }, () => app.http.delete(`/api/text-messages/${id}`).set('Authorization', auth)));
        expect(statuses(res)).toEqual([200, ...Array(DELETERS - 1).fill(404)]);
      }
    });

    it('a campaign that does not exist is a 400 naming campaignId (the foreign key, no pre-check)', async () => {
      const res = await app.http
        .post('/api/text-messages/new')
        .set('Authorization', auth)
        .send({ content: 'x', recipient: '+14155550100', campaignId: 999999 });
      expect(res.status).toBe(400);
      expect(res.body.error.details).toEqual([{ field: 'campaignId', message: 'campaign 999999 does not exist' }]);
    });
  });
});
