/**
 * A short soak: a few minutes of mixed traffic (create, read, list, search, edit, delete, campaign
 * membership) against one instance. Asserts no error answer and no growth of the resident set
 * beyond a stated bound after warm-up (SOAK_SECONDS, default 120; SOAK_RSS_GROWTH_MB, default 64).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { Agent, request as httpRequest } from 'node:http';
import { DEPLOYED_NODE_OPTIONS, startApp, type TestApp } from '../support/app.js';

const SECONDS = Number(process.env.SOAK_SECONDS ?? 120);
const RSS_GROWTH_MB = Number(process.env.SOAK_RSS_GROWTH_MB ?? 64);
const WARMUP_SECONDS = Math.min(30, Math.floor(SECONDS / 4));

function rssMb(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : 0;
}

describe('soak', () => {
  let app: TestApp;
  let auth: string;
  const agent = new Agent({ keepAlive: true, maxSockets: 16 });

  beforeAll(async () => {
    // As deployed: with the image's Node options (its V8 heap limit), which is what the bound is about.
    app = await startApp({ env: { RATE_LIMIT_ENTERPRISE: '100000000', NODE_OPTIONS: DEPLOYED_NODE_OPTIONS } });
    auth = `Bearer ${await app.token('*', { plan: 'enterprise' })}`;
  });
  afterAll(async () => {
    agent.destroy();
    await app?.stop();
  });

  function call(method: string, path: string, body?: object): Promise<{ status: number; json: { [k: string]: unknown } }> {
    return new Promise((resolve, reject) => {
      const payload = body ? JSON.stringify(body) : undefined;
      const req = httpRequest(
        {
          host: '127.0.0.1',
          port: app.port,
          method,
          path,
          agent,
          headers: { authorization: auth, ...(payload ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) } : {}) },
        },
        (res) => {
          let data = '';
          res.on('data', (c: Buffer) => (data += c.toString()));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, json: data ? JSON.parse(data) : {} }));
        },
      );
      req.on('error', reject);
      if (payload) req.write(payload);
      req.end();
    });
  }

  it(`runs ${SECONDS} s of mixed traffic with no error and bounded memory`, async () => {
    const campaign = (await call('POST', '/api/campaigns/new', { name: 'Soak campaign' })).json.campaign as { id: number };
    const deadline = Date.now() + SECONDS * 1000;
    const samples: { t: number; rss: number }[] = [];
    const sampler = setInterval(() => samples.push({ t: Date.now(), rss: rssMb(app.process.pid!) }), 1000);
    const failures: string[] = [];
    let requests = 0;
    let seq = 0;
    const start = Date.now();
    await Promise.all(
      Array.from({ length: 12 }, async (_, w) => {
        while (Date.now() < deadline) {
          const n = seq++;
          const created = await call('POST', '/api/contacts', { name: `Soak ${w} ${n}`, email: `soak-${w}-${n}@soak.test`, company: `Soak Co ${n % 50}` });
          const id = (created.json.contact as { id: number } | undefined)?.id;
          const steps: [string, string, object | undefined, number[]][] = [
            ['GET', `/api/contacts/${id}`, undefined, [200]],
            ['GET', `/api/contacts?search=soak%20co%20${n % 50}&limit=10`, undefined, [200]],
            ['GET', `/api/contacts?page=${1 + (n % 20)}&orderBy=name`, undefined, [200]],
            ['PATCH', `/api/contacts/${id}`, { title: `Title ${n}` }, [200]],
            ['POST', `/api/campaigns/${campaign.id}/contact/${id}/add`, undefined, [200]],
            ['GET', `/api/campaigns/${campaign.id}/contacts?limit=5`, undefined, [200]],
            ['POST', '/api/contacts', { name: 'Duplicate', email: `soak-${w}-${n}@soak.test` }, [409]],
            ['DELETE', `/api/contacts/${id}`, undefined, n % 3 === 0 ? [200] : [200]],
          ];
          requests++;
          if (created.status !== 201) failures.push(`create: ${created.status}`);
          for (const [method, path, body, ok] of n % 3 === 0 ? steps : steps.slice(0, -1)) {
            const r = await call(method, path, body);
            requests++;
            if (!ok.includes(r.status)) failures.push(`${method} ${path}: ${r.status} ${JSON.stringify(r.json).slice(0, 200)}`);
          }
        }
      }),
    );
    clearInterval(sampler);
    const afterWarmup = samples.filter((s) => s.t - start >= WARMUP_SECONDS * 1000);
    const baseline = Math.min(...afterWarmup.slice(0, 5).map((s) => s.rss));
    const peak = Math.max(...afterWarmup.map((s) => s.rss));
    process.stderr.write(
      `soak: ${requests} requests in ${SECONDS} s (${Math.round(requests / SECONDS)} req/s); RSS after warm-up ${baseline.toFixed(0)} MB, peak ${peak.toFixed(0)} MB\n`,
    );
    expect(failures.slice(0, 10)).toEqual([]);
    expect(requests).toBeGreaterThan(SECONDS * 20);
    expect(peak - baseline).toBeLessThan(RSS_GROWTH_MB);
  });
});
