/**
 * A client generated from the OpenAPI document is usable without casts: the
 * document of the running server goes through openapi-typescript, a small program written against
 * openapi-fetch lists contacts with search and paging and reads the `error.code` of a 404 and of a
 * 400; it must type-check (tsc --noEmit, strict), and then it runs against the same server.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { ROOT, startApp, type TestApp } from './support/app.js';

const run = promisify(execFile);

const PROGRAM = `
import createClient from 'openapi-fetch';
import type { components, paths } from './schema.js';

type ErrorCode = components['schemas']['ApiErrorBody']['error']['code'];

const client = createClient<paths>({ baseUrl: process.env.BASE_URL!, headers: { Authorization: \`Bearer \${process.env.TOKEN}\` } });

async function main(): Promise<void> {
  for (const name of ['Ada Lovelace', 'Ada Byron', 'Grace Hopper']) {
    const created = await client.POST('/api/contacts/new', { body: { name, email: name.toLowerCase().replace(' ', '.') + '@example.com' } });
    if (!created.data) throw new Error('create failed: ' + created.error?.error.code);
    const id: number = created.data.contact.id;
    void id;
  }
  const query = { search: 'ada', limit: 1, orderBy: 'name', orderByDir: 'asc' } as const;
  const page1 = await client.GET('/api/contacts', { params: { query: { ...query, page: 1 } } });
  const page2 = await client.GET('/api/contacts', { params: { query: { ...query, page: 2 } } });
  if (!page1.data || !page2.data) throw new Error('list failed');
  const total: number = page1.data.total;
  const names: string[] = [...page1.data.contacts, ...page2.data.contacts].map((c) => c.name);

  const missing = await client.GET('/api/contacts/{id}', { params: { path: { id: 2147483647 } } });
  const notFound: ErrorCode | undefined = missing.error?.error.code;

  const invalid = await client.POST('/api/contacts/new', { body: { name: '', email: 'not-an-email' } });
  const invalidCode: ErrorCode | undefined = invalid.error?.error.code;
  const invalidFields: string[] | undefined = invalid.error?.error.details?.map((d) => d.field);

  const badPage = await client.GET('/api/contacts', { params: { query: { page: 0 } } });
  const badPageCode: ErrorCode | undefined = badPage.error?.error.code;

  if (process.env.NEVER === 'true') {
    // @ts-expect-error orderBy takes only the documented columns
    await client.GET('/api/contacts', { params: { query: { orderBy: 'favouriteColour' } } });
    // @ts-expect-error limit is an integer, not a string
    await client.GET('/api/contacts', { params: { query: { limit: 'ten' } } });
    // @ts-expect-error path ids are integers
    await client.GET('/api/contacts/{id}', { params: { path: { id: 'abc' } } });
    // @ts-expect-error ownerId is an integer id, not a string
    await client.POST('/api/contacts/new', { body: { name: 'x', email: 'x@example.com', ownerId: '1' } });
  }

  console.log(JSON.stringify({
    total, names,
    notFound: { status: missing.response.status, code: notFound },
    invalid: { status: invalid.response.status, code: invalidCode, fields: invalidFields },
    badPage: { status: badPage.response.status, code: badPageCode },
  }));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
`;

describe('a typed client generated from the OpenAPI document', () => {
  let app: TestApp;
  let token: string;
  // Under node_modules/ so that the program resolves openapi-fetch from the project.
  const dir = join(ROOT, 'node_modules', '.cache', `openapi-client-${randomBytes(4).toString('hex')}`);

  beforeAll(async () => {
    app = await startApp({ role: 'api' });
    token = await app.token('*');
    mkdirSync(dir, { recursive: true });
  });
  afterAll(async () => {
    rmSync(dir, { recursive: true, force: true });
    await app?.stop();
  });

  it('generates, type-checks and runs a program that lists with search and paging and reads error codes', async () => {
    const doc = (await app.http.get('/api/docs-json')).body;
    writeFileSync(join(dir, 'openapi.json'), JSON.stringify(doc));
    await run(process.execPath, [join(ROOT, 'node_modules/openapi-typescript/bin/cli.js'), join(dir, 'openapi.json'), '-o', join(dir, 'schema.d.ts')], {
      cwd: ROOT,
    });
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ type: 'module', private: true }));
    writeFileSync(join(dir, 'program.ts'), PROGRAM);
    writeFileSync(
      join(dir, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          strict: true,
          module: 'nodenext',
          moduleResolution: 'nodenext',
          target: 'ES2022',
          lib: ['ES2023', 'DOM'],
          types: ['node'],
          typeRoots: [join(ROOT, 'node_modules/@types')],
          skipLibCheck: true,
          outDir: 'out',
        },
        files: ['program.ts'],
      }),
    );
    const tsc = join(ROOT, 'node_modules/typescript/bin/tsc');
    const checked = await run(process.execPath, [tsc, '--noEmit', '-p', join(dir, 'tsconfig.json')], { cwd: dir }).then(
      () => '',
      (e: unknown) => {
        const out = e as { stdout?: string; stderr?: string };
        return `${out.stdout ?? ''}${out.stderr ?? ''}`;
      },
    );
    expect(checked).toBe('');

    await run(process.execPath, [tsc, '--noCheck', '-p', join(dir, 'tsconfig.json')], { cwd: dir });
    const { stdout } = await run(process.execPath, [join(dir, 'out/program.js')], { cwd: dir, env: { ...process.env, BASE_URL: app.url, TOKEN: token } });
    const result = JSON.parse(stdout.trim().split('\n').pop()!);
    expect(result.total).toBe(2);
    expect(result.names).toEqual(['Ada Byron', 'Ada Lovelace']);
    expect(result.notFound).toEqual({ status: 404, code: 'not_found' });
    expect(result.invalid.status).toBe(400);
    expect(result.invalid.code).toBe('validation_failed');
    expect(result.invalid.fields).toEqual(expect.arrayContaining(['name', 'email']));
    expect(result.badPage).toEqual({ status: 400, code: 'validation_failed' });
  }, 180_000);
});
