/**
 * The import-boundary rules (.dependency-cruiser.cjs, run by `npm run lint`) catch each kind of violation:
 * dependency-cruiser runs with the project's configuration on small trees written to a temporary directory,
 * once on a tree that keeps every rule (no violation may be reported) and once on the same tree plus one
 * deliberate violation per rule (each must be reported, and nothing else).
 */
import { beforeAll, describe, expect, it } from '@jest/globals';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const depcruise = join(root, 'node_modules/dependency-cruiser/bin/dependency-cruise.mjs');
const config = join(root, '.dependency-cruiser.cjs');

/** A tree that keeps every rule: floors import floors, features import other features' public surface only. */
const CLEAN: Record<string, string> = {
  'src/patches/library.ts': `export const internal = 3000;`,
  'src/config/config.ts': `import { internal } from '../patches/library.js';\nexport const config = { port: internal };`,
  'src/common/errors.ts': `import { config } from '../config/config.js';\nexport const port = config.port;`,
  'src/jobs/job-queue.ts': `import { port } from '../common/errors.js';\nexport const queue = port;`,
  'src/server/http.ts': `import { queue } from '../jobs/job-queue.js';\nimport { internal } from '../patches/library.js';\nexport const server = queue + internal;`,
  'src/batch/batch.ts': `import { server } from '../server/http.js';\nexport const B = server;`,
  'src/contacts/contact.entity.ts': `export class Contact { id = 0; }`,
  'src/contacts/contact.rules.ts': `export const isName = (s: string) => s.length > 0;`,
  'src/contacts/contact.dto.ts': `export interface ContactRecord { id: number }`,
  'src/contacts/contacts.repository.ts':
    `import { Contact } from './contact.entity.js';\nimport { isName } from './contact.rules.js';\n` +
    `export class ContactsRepository { find() { return isName('x') ? new Contact() : null; } }`,
  'src/contacts/contacts.service.ts': `import { ContactsRepository } from './contacts.repository.js';\nexport class ContactsService { constructor(readonly repo: ContactsRepository) {} }`,
  'src/contacts/contacts.module.ts': `import { ContactsService } from './contacts.service.js';\nexport const ContactsModule = [ContactsService];`,
  'src/campaigns/campaigns.service.ts':
    `import { queue } from '../jobs/job-queue.js';\nimport type { ContactRecord } from '../contacts/contact.dto.js';\n` +
    `import { ContactsService } from '../contacts/contacts.service.js';\nimport { ContactsRepository } from '../contacts/contacts.repository.js';\n` +
    `export type R = ContactRecord;\nexport const deps = [queue, ContactsService, ContactsRepository];`,
  'src/campaigns/campaigns.module.ts': `import { ContactsModule } from '../contacts/contacts.module.js';\nexport const CampaignsModule = [ContactsModule];`,
  'src/app.module.ts': `import { CampaignsModule } from './campaigns/campaigns.module.js';\nexport const AppModule = [CampaignsModule];`,
};

/** One deliberate violation per rule: [file, source, rule expected to report it, the import it must name]. */
const VIOLATIONS: [string, string, string, string][] = [
  [
    'src/campaigns/uses-entity.ts',
    `import type { Contact } from '../contacts/contact.entity.js';\nexport type C = Contact;`,
    'feature-private-import',
    'src/contacts/contact.entity.ts',
  ],
  [
    'src/campaigns/uses-rules.ts',
    `import { isName } from '../contacts/contact.rules.js';\nexport const f = isName;`,
    'feature-private-import',
    'src/contacts/contact.rules.ts',
  ],
  ['src/common/uses-auth.ts', `import { P } from '../auth/permissions.js';\nexport const p = P;`, 'floor-imports-feature', 'src/auth/permissions.ts'],
  [
    'src/jobs/uses-feature.ts',
    `import { ContactsService } from '../contacts/contacts.service.js';\nexport const s = ContactsService;`,
    'floor-imports-feature',
    'src/contacts/contacts.service.ts',
  ],
  ['src/database/uses-root.ts', `import { AppModule } from '../app.module.js';\nexport const m = AppModule;`, 'floor-imports-feature', 'src/app.module.ts'],
  ['src/common/uses-lists.ts', `import { L } from '../lists/list.js';\nexport const l = L;`, 'floor-imports-higher-floor', 'src/lists/list.ts'],
  ['src/server/uses-batch.ts', `import { B } from '../batch/batch.js';\nexport const b = B;`, 'floor-imports-higher-floor', 'src/batch/batch.ts'],
  ['src/contacts/uses-root.ts', `import { AppModule } from '../app.module.js';\nexport const m = AppModule;`, 'feature-imports-root', 'src/app.module.ts'],
  ['src/config/uses-common.ts', `import { port } from '../common/errors.js';\nexport const p = port;`, 'config-imports-src', 'src/common/errors.ts'],
  ['src/patches/uses-config.ts', `import { config } from '../config/config.js';\nexport const c = config;`, 'patches-imports-src', 'src/config/config.ts'],
  ['src/deals/cycle-a.ts', `import { b } from './cycle-b.js';\nexport const a = () => b;`, 'no-circular', 'src/deals/cycle-b.ts'],
];
/** Files the violations need that are not violations themselves (the cycle is reported once, from its first file). */
const SUPPORT: Record<string, string> = {
  'src/auth/permissions.ts': `export const P = 'contacts:read';`,
  'src/lists/list.ts': `export const L = 1;`,
  'src/deals/cycle-b.ts': `import { a } from './cycle-a.js';\nexport const b = () => a;`,
};

/** Runs the boundary check exactly as `npm run lint:boundaries` does, on `files` written to a temporary directory. */
function cruise(files: Record<string, string>): { status: number | null; violations: string[]; output: string } {
  const dir = mkdtempSync(join(tmpdir(), 'boundaries-'));
  try {
    for (const [file, text] of Object.entries(files)) {
      mkdirSync(dirname(join(dir, file)), { recursive: true });
      writeFileSync(join(dir, file), text + '\n');
    }
    const r = spawnSync(process.execPath, [depcruise, 'src', '--config', config, '--output-type', 'err'], { cwd: dir, encoding: 'utf8' });
    const output = r.stdout + r.stderr;
    // The err reporter prints each violation as "  error <rule>: <from> → <to>" (a cycle continues on the next lines).
    const violations = [...output.matchAll(/^\s*error (\S+): (\S+) →\s+(\S+)/gm)].map(([, rule, from, to]) => `${rule}: ${from} -> ${to}`);
    return { status: r.status, violations: violations.sort(), output };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe('import boundaries (.dependency-cruiser.cjs)', () => {
  let clean: ReturnType<typeof cruise>;
  let broken: ReturnType<typeof cruise>;
  beforeAll(() => {
    clean = cruise(CLEAN);
    broken = cruise({ ...CLEAN, ...SUPPORT, ...Object.fromEntries(VIOLATIONS.map(([file, text]) => [file, text])) });
  });

  it('passes a tree that keeps the rules (floors import floors, features import public surfaces)', () => {
    expect(clean.violations).toEqual([]);
    expect(clean.output).toMatch(/no dependency violations found/);
    expect(clean.status).toBe(0);
  });

  it('fails, naming each deliberate violation and its rule, and nothing else', () => {
    expect(broken.status).not.toBe(0);
    const expected = VIOLATIONS.map(([file, , rule, to]) => `${rule}: ${file} -> ${to}`).sort();
    expect(broken.violations).toEqual(expected);
  });
});
