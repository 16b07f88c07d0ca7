import { beforeAll, describe, expect, it } from '@jest/globals';
import { Readable } from 'node:stream';
import type { Principal } from '../common/request.js';
import { useServiceSpec } from '../../test/support/service-testing.js';
import { waitUntil } from '../../test/support/wait.js';
import { ImportRunner } from './import-runner.service.js';
import type { StoredImportFile } from './import-upload.engine.js';
import { MAX_JOB_RUNS, RUNS_EXHAUSTED } from './import.rules.js';
import { ImportsRepository } from './imports.repository.js';
import { ImportsService } from './imports.service.js';
import { JobFiles } from './job-files.js';

/**
 * Imports on a real database with the in-process job runner: an upload is checked and queued, the
 * worker writes it and ends it with its counts and row errors; an import is its creator's (another
 * user's is a 404 unless the token holds '*'); cancel and the worker's start/finish move the status
 * one way only, and of two cancels at once exactly one wins.
 */
describe('ImportsService (service layer, real PostgreSQL)', () => {
  const spec = useServiceSpec();
  let imports: ImportsService;
  let runner: ImportRunner;
  let files: JobFiles;
  let seq = 0;

  beforeAll(() => {
    imports = spec.ctx.get(ImportsService);
    runner = spec.ctx.get(ImportRunner);
    files = spec.ctx.get(JobFiles);
  });

  /** A CSV stored as multer's engine stores an upload. */
  async function upload(csv: string, originalname = 'people.csv'): Promise<StoredImportFile> {
    const stored = await files.write('imports', Readable.from([csv]));
    return { storageKey: stored.key, size: stored.size, originalname };
  }
  const ended = (id: number) =>
    waitUntil(
      `import ${id} to end`,
      async () => {
        const r = await imports.get(id, spec.who);
        return r.status === 'completed' || r.status === 'failed' ? r : null;
      },
      20_000,
    );
  /** An open import that no job was queued for (the cancel and status tests drive it themselves). */
  async function openImport(who: Principal = spec.who): Promise<number> {
    const row = await spec.ctx.get(ImportsRepository).insertImport(
      {
        object: 'contacts',
        sourceFormat: 'csv',
        storageKey: null,
        fileName: null,
        fileSize: 0,
        options: { mapping: {}, mode: 'create', idProperty: 'email', emptyValues: 'ignore', campaignId: null, dryRun: false, columns: null, chunkRows: 100 },
        principal: { userId: who.userId, userName: who.userName, plan: who.plan, team: null, apiTokenId: 0, permissions: ['*'] },
      },
      who,
    );
    return row.id;
  }

  it('imports an uploaded CSV: queued at once, then completed with its counts, the row errors listed with their column', async () => {
    const a = `imp${++seq}-${Date.now()}@svc.test`;
    const b = `imp${++seq}-${Date.now()}@svc.test`;
    const file = await upload(`Full name,E-mail\nAda,${a}\nBad,not-an-email\n,\nBob,${b}\n`);
    const created = await imports.createFromUpload(
      { object: 'contacts', mode: 'create', mapping: JSON.stringify({ 'Full name': 'name', 'E-mail': 'email' }) },
      file,
      spec.who,
    );
    expect(created).toMatchObject({
      object: 'contacts',
      status: 'queued',
      source: 'csv',
      fileName: 'people.csv',
      fileSize: file.size,
      mapping: { 'Full name': 'name', 'E-mail': 'email' },
      idProperty: 'email',
      createdBy: spec.who.userId,
    });

    const done = await ended(created.id);
    expect(done).toMatchObject({ status: 'completed', progress: 1, counts: { total: 4, processed: 4, created: 2, updated: 0, skipped: 1, failed: 1 } });
    const names = await spec.ctx.query<{ name: string }>(`SELECT name FROM contacts WHERE email = ANY($1::text[]) ORDER BY name`, [[a, b]]);
    expect(names.map((r) => r.name)).toEqual(['Ada', 'Bob']);
    const errors = await imports.errors(created.id, { limit: 100, after: 0 }, spec.who);
    expect(errors.total).toBe(1);
    expect(errors.errors).toEqual([expect.objectContaining({ row: 2, column: 'E-mail', code: 'validation_failed' })]);
    // The file is dropped once the import has ended.
    expect(await files.size(file.storageKey)).toBeNull();
    const notes = await spec.ctx.query<{ details: { importId: number } }>(
      `SELECT details FROM notifications WHERE user_id = $1 AND type = 'import_completed'`,
      [spec.who.userId],
    );
    expect(notes.map((n) => n.details.importId)).toContain(created.id);
  });

  it('refuses a mapping that cannot work (400 naming the column) and drops the uploaded file', async () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ object: 'contacts', mode: 'create', mapping: '{not json' }, 'mapping'],
      [{ object: 'contacts', mode: 'create', mapping: JSON.stringify({ Email: 'nope' }) }, 'mapping.Email'],
      [{ object: 'contacts', mode: 'create', mapping: JSON.stringify({ Tier: 'fields.no_such_field' }) }, 'mapping.Tier'],
      [{ object: 'companies', mode: 'create', segmentId: '1' }, 'segmentId'],
      [{ object: 'contacts', mode: 'create', campaignId: '987654' }, 'campaignId'],
      [{ object: 'deals', mode: 'update', idProperty: 'email' }, 'idProperty'],
    ];
    for (const [form, field] of cases) {
      const file = await upload('Email\nx@svc.test\n');
      const e = await spec.ctx.failure(imports.createFromUpload(form, file, spec.who));
      expect({ form, code: e.code, field: e.details?.[0]?.field }).toEqual({ form, code: 'validation_failed', field });
      expect(await files.size(file.storageKey)).toBeNull();
    }
    const missing = await spec.ctx.failure(imports.createFromUpload({ object: 'contacts', mode: 'create' }, undefined, spec.who));
    expect(missing.details?.[0]?.field).toBe('file');
    const rows = await spec.ctx.failure(imports.createFromRows({ object: 'contacts', mode: 'create', rows: [{ email: 'a@svc.test' }, [1]] }, spec.who));
    expect(rows.details?.[0]?.field).toBe('rows.1');
  });

  it("needs the object's write permission besides imports:write", async () => {
    const who = await spec.ctx.principal({ permissions: new Set(['imports:write', 'companies:write']) });
    const file = await upload('Email\nx@svc.test\n');
    expect((await spec.ctx.failure(imports.createFromUpload({ object: 'contacts', mode: 'create' }, file, who))).code).toBe('forbidden');
    expect(await files.size(file.storageKey)).toBeNull();
  });

  it("another user's import, its errors and its cancel are a 404 unless the token holds '*'", async () => {
    const id = await openImport();
    const other = await spec.ctx.principal({ permissions: new Set(['imports:read', 'imports:write', 'contacts:write']) });
    expect((await spec.ctx.failure(imports.get(id, other))).code).toBe('not_found');
    expect((await spec.ctx.failure(imports.errors(id, { limit: 10, after: 0 }, other))).code).toBe('not_found');
    expect((await spec.ctx.failure(imports.cancel(id, other))).code).toBe('not_found');
    expect((await imports.get(id, spec.who)).status).toBe('queued');
    const admin = await spec.ctx.principal();
    expect((await imports.get(id, admin)).id).toBe(id);
    expect((await imports.cancel(id, admin)).status).toBe('canceled');
  });

  it('of two cancels at once exactly one wins; the other, and any later one, is a 409 naming the status', async () => {
    for (let round = 0; round < 3; round++) {
      const id = await openImport();
      const outcomes = await Promise.allSettled([imports.cancel(id, spec.who), imports.cancel(id, spec.who)]);
      const won = outcomes.filter((o) => o.status === 'fulfilled');
      expect(won).toHaveLength(1);
      expect((won[0] as PromiseFulfilledResult<{ status: string }>).value.status).toBe('canceled');
      const lost = outcomes.find((o) => o.status === 'rejected') as PromiseRejectedResult;
      expect(lost.reason).toMatchObject({ code: 'conflict', message: `Import ${id} has already ended (canceled)` });
      expect((await spec.ctx.failure(imports.cancel(id, spec.who))).code).toBe('conflict');
      const events = await spec.ctx.query<{ n: number }>(`SELECT count(*)::int AS n FROM events WHERE type = 'import.completed' AND (data->>'id')::int = $1`, [
        id,
      ]);
      expect(events[0].n).toBe(1);
    }
  });

  it('status moves one way: queued, validating, running, then one end; an ended import is not taken up or ended again', async () => {
    const id = await openImport();
    const started = await runner.start(id);
    expect(started?.status).toBe('validating');
    expect((await runner.setTotal(id, 0))?.status).toBe('running');
    const finished = await runner.finish(id, 'completed', null);
    expect(finished).toMatchObject({ status: 'completed', progress: 1 });
    expect(await runner.finish(id, 'failed', 'late')).toBeNull();
    expect(await runner.start(id)).toBeNull();
    expect(await runner.setTotal(id, 5)).toBeNull();
    expect((await spec.ctx.failure(imports.cancel(id, spec.who))).message).toBe(`Import ${id} has already ended (completed)`);
    expect((await imports.get(id, spec.who)).status).toBe('completed');
  });

  it(`a run past ${MAX_JOB_RUNS} ends the import failed instead of taking it up`, async () => {
    const id = await openImport();
    await spec.ctx.query(`UPDATE imports SET runs = $2 WHERE id = $1`, [id, MAX_JOB_RUNS]);
    expect(await runner.start(id)).toBeNull();
    expect(await imports.get(id, spec.who)).toMatchObject({ status: 'failed', error: RUNS_EXHAUSTED });
  });

  it('checks the parameters of the errors list', () => {
    expect(imports.errorsQuery({})).toEqual({ limit: 100, after: 0, format: 'json' });
    expect(imports.errorsQuery({ limit: '1000', after: '7', format: 'csv' })).toEqual({ limit: 1000, after: 7, format: 'csv' });
    for (const [query, field] of [
      [{ limit: '0' }, 'limit'],
      [{ limit: '1001' }, 'limit'],
      [{ after: '-1' }, 'after'],
      [{ format: 'xml' }, 'format'],
      [{ page: '2' }, 'page'],
    ] as const) {
      let thrown: unknown = null;
      try {
        imports.errorsQuery(query);
      } catch (e) {
        thrown = e;
      }
      expect(thrown).toMatchObject({ code: 'validation_failed', details: [{ field }] });
    }
  });
});
