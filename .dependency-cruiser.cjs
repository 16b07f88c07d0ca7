/**
 * Import boundaries of src/ (docs/decisions/floors-and-features.md).
 * Run by `npm run lint` (`npm run lint:boundaries`); test/boundaries.spec.ts proves each rule fails on a
 * deliberate violation.
 *
 * Floors, bottom to top. Each floor imports only the floors listed beside it (lower ones), never a feature
 * and never the composition root (src/*.ts: main, app.module, cli, healthcheck):
 *
 *   patches                      nothing from src/ (one file per library whose internals the API relies on,
 *                                each with a spec that fails when an upgrade changes them)
 *   config                       patches
 *   common                       patches, config
 *   database, redis              config, common
 *   jobs                         config, common, database, redis
 *   lists, idempotency           the above (lists: list queries; idempotency: Idempotency-Key)
 *   server                       the above (the HTTP server and request path)
 *   batch                        the above (the batch engine answers item errors as the server does)
 *
 * Every floor above patches may import patches; the lists below name the floors each imports besides it.
 *
 * Features: every other folder under src/ (contacts, auth, console, events, imports, ...) is a feature. A
 * feature may import every floor, and from another feature only that feature's public surface:
 *   - `<name>.module.ts`      the Nest module to import;
 *   - `<name>.service.ts`     its services;
 *   - `<name>.repository.ts`  its repositories (injecting one from another feature only works when its module
 *                             exports it: Nest refuses to boot otherwise, so "exported by the module" is
 *                             enforced at start-up, and this rule keeps everything else out);
 *   - `<name>.dto.ts`, `dto/` its request and record types;
 *   - `index.ts`              a feature that wants a single entry point may add one;
 *   - the few files listed in PUBLIC_FILES below, each that feature's declared public API.
 * Everything else in a feature is private to it: entities (`*.entity.ts`), rules (`*.rules.ts`), constraints,
 * mappers, controllers, processors, pipes and helpers. Type-only imports count (tsPreCompilationDeps).
 *
 * Specs (`*.spec.ts`) may reach into any folder to arrange their state; the composition root (src/*.ts) wires
 * everything together and is not restricted.
 */
const FLOOR_IMPORTS = {
  patches: [],
  config: ['patches'],
  common: ['config'],
  database: ['config', 'common'],
  redis: ['config', 'common'],
  jobs: ['config', 'common', 'database', 'redis'],
  lists: ['config', 'common', 'database'],
  idempotency: ['config', 'common', 'database', 'redis', 'jobs'],
  server: ['config', 'common', 'database', 'redis', 'jobs', 'lists', 'idempotency'],
  batch: ['config', 'common', 'database', 'redis', 'jobs', 'lists', 'idempotency', 'server'],
};
// Every floor above patches imports patches (the bottom floor).
for (const [floor, below] of Object.entries(FLOOR_IMPORTS)) if (floor !== 'patches' && !below.includes('patches')) below.unshift('patches');
const FLOOR_NAMES = Object.keys(FLOOR_IMPORTS);
const FLOORS = `(${FLOOR_NAMES.join('|')})`;

/** Feature files other than module/service/repository/dto that are that feature's declared public API. */
const PUBLIC_FILES = [
  // Route access metadata and the principal decorator: every controller uses them.
  '^src/auth/(permissions|current-principal[.]decorator|auth[.]guards)[.]ts$',
  // The SMS provider port (injection token and interface) and the delivery-report signature check.
  '^src/sms/(sms-provider|signature)[.]ts$',
  // The shared token-bucket store that auth's sign-in throttling reuses.
  '^src/rate-limit/rate-limit[.]bucket[.]ts$',
  // A record's column map (its properties, their types, which are writable): imports and merge fields read them.
  '^src/[^/]+/[^/]+[.]columns[.]ts$',
];

const PUBLIC_SURFACE = ['[.](module|service|repository|dto)[.]ts$', '/dto/', '/index[.]ts$', ...PUBLIC_FILES];
const SPEC = '[.]spec[.]ts$';

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'floor-imports-feature',
      severity: 'error',
      comment: `${FLOORS} are floors: they import no feature folder, not auth and not the composition root (src/*.ts).`,
      from: { path: `^src/${FLOORS}/`, pathNot: SPEC },
      to: { path: '^src/', pathNot: `^src/${FLOORS}/` },
    },
    {
      name: 'config-imports-src',
      severity: 'error',
      comment: 'config imports nothing else from src/ but patches.',
      from: { path: '^src/config/', pathNot: SPEC },
      to: { path: '^src/', pathNot: '^src/(config|patches)/' },
    },
    {
      name: 'patches-imports-src',
      severity: 'error',
      comment: 'patches is the bottom floor: it imports nothing else from src/.',
      from: { path: '^src/patches/', pathNot: SPEC },
      to: { path: '^src/', pathNot: '^src/patches/' },
    },
    // One rule per floor above config: it imports only the floors below it (no arrow back up the floors).
    // (patches and config have their own rule above.)
    ...Object.entries(FLOOR_IMPORTS)
      .filter(([floor]) => floor !== 'patches' && floor !== 'config')
      .map(([floor, below]) => ({
        name: 'floor-imports-higher-floor',
        severity: 'error',
        comment: `${floor} is a floor that imports only ${below.join(', ')} among the floors.`,
        from: { path: `^src/${floor}/`, pathNot: SPEC },
        to: { path: `^src/${FLOORS}/`, pathNot: `^src/(${[floor, ...below].join('|')})/` },
      })),
    {
      name: 'feature-private-import',
      severity: 'error',
      comment:
        'A feature imports another feature only through its public surface (*.module.ts, *.service.ts, *.repository.ts, ' +
        '*.dto.ts, dto/, index.ts, or a file listed in PUBLIC_FILES); entities, rules and the rest stay private.',
      from: { path: '^src/([^/]+)/', pathNot: [`^src/${FLOORS}/`, SPEC] },
      to: { path: '^src/[^/]+/', pathNot: ['^src/$1/', `^src/${FLOORS}/`, ...PUBLIC_SURFACE] },
    },
    {
      name: 'feature-imports-root',
      severity: 'error',
      comment: 'The composition root (src/*.ts: main, app.module, cli) wires features together; no feature imports it.',
      from: { path: '^src/[^/]+/', pathNot: [`^src/${FLOORS}/`, SPEC] },
      to: { path: '^src/[^/]+[.]ts$' },
    },
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'Import cycles between files (Nest forwardRef() cycles included) make the boot order and the tests fragile.',
      from: { path: '^src/', pathNot: SPEC },
      to: { circular: true },
    },
  ],
  options: {
    includeOnly: '^src/',
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: require('node:path').join(__dirname, 'tsconfig.json') },
    reporterOptions: { text: { highlightFocused: true } },
  },
};
