// ESLint: typescript-eslint's strict type-checked rules on every TypeScript file (type information
// from tsconfig.json through the project service), ESLint's recommended rules on the JavaScript
// files, and eslint-config-prettier last so no rule argues with Prettier (`.prettierrc`) about layout.
// Import boundaries between folders are checked by dependency-cruiser (`.dependency-cruiser.cjs`).
// `npm run lint` runs all three.
//
// Where a strict rule is turned off or narrowed below, the comment says why; everything else in
// strictTypeChecked applies as published.
import js from '@eslint/js';
import { defineConfig } from 'eslint/config';
import prettier from 'eslint-config-prettier';
import globals from 'globals';
import tseslint from 'typescript-eslint';

/** Files that must hold no SQL and no TypeORM access: repositories own the SQL (docs/decisions/floors-and-features.md). */
/** A string that starts like an SQL statement (upper-case keywords, as every statement in this code base is written). */
const SQL_START = String.raw`/^\s*(SELECT\s|INSERT\s+INTO\s|UPDATE\s+\S+\s+SET\s|DELETE\s+FROM\s|WITH\s+\S+\s+AS\s)/`;
const NO_SQL_FILES = ['src/**/*.service.ts', 'src/**/*.controller.ts', 'src/**/*.processor.ts'];

export default defineConfig(
  { ignores: ['dist/', 'coverage/', 'data/', 'bench/.data/', 'node_modules/'] },

  {
    files: ['**/*.ts'],
    extends: [js.configs.recommended, tseslint.configs.strictTypeChecked],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      // Nest modules are empty classes carrying a @Module() decorator.
      '@typescript-eslint/no-extraneous-class': ['error', { allowWithDecorator: true }],
      // DTOs are classes so that class-validator and Swagger can read them, but services build and pass
      // plain objects of those shapes (a partial update, a replaced record); no code relies on the prototype.
      '@typescript-eslint/no-unsafe-class-instance-assignment': 'off',
      // Declared types describe the valid shape, and the code deliberately checks what arrives at run time:
      // request bodies may carry null where a DTO says `?: string`, pg rows and Record lookups may miss
      // keys (no noUncheckedIndexedAccess). The rule reports each such guard as "unnecessary".
      '@typescript-eslint/no-unnecessary-condition': 'off',
      // Numbers in template literals (ids, counts, limits in messages and URLs) are fine.
      '@typescript-eslint/restrict-template-expressions': ['error', { allowNumber: true }],
      // `() => res.end()` style callbacks are idiomatic; statement-level void misuse is still reported.
      '@typescript-eslint/no-confusing-void-expression': ['error', { ignoreArrowShorthand: true }],
      // Async interface implementations (JobQueue, SmsProvider, throttler overrides) are async by
      // contract even when one implementation has nothing to await.
      '@typescript-eslint/require-await': 'off',
      // Custom field values live in a plain jsonb object keyed by the field alias; removing a key is the operation.
      '@typescript-eslint/no-dynamic-delete': 'off',
      // Spreading a string into code points is how the file-name and header rules count characters.
      '@typescript-eslint/no-misused-spread': ['error', { allow: [{ from: 'lib', name: 'string' }] }],
      // `_name` marks a deliberately unused binding (rest-omit, positional parameter).
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrorsIgnorePattern: '^_', ignoreRestSiblings: true },
      ],
    },
  },

  {
    // Tests read supertest's `res.body` (typed `any`) and assert on it field by field, use `!` after an
    // assertion already proved presence, and build failure messages from whatever they received. Typing
    // every response body would add nothing a failing assertion does not already say.
    files: ['test/**/*.ts', 'src/**/*.spec.ts'],
    rules: {
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      '@typescript-eslint/restrict-plus-operands': 'off',
      '@typescript-eslint/no-non-null-assertion': 'off',
      // Failure messages interpolate whatever a response or document held (unknown, objects).
      '@typescript-eslint/restrict-template-expressions': 'off',
      '@typescript-eslint/no-base-to-string': 'off',
    },
  },

  {
    // The two readers of Nest's decorator metadata: Reflect.getMetadata() answers `any`, and Nest types
    // controllers and handlers as `Function`. Everywhere else these rules stay on.
    files: ['src/server/route-table.ts', 'src/server/openapi-document.ts'],
    rules: {
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-function-type': 'off',
    },
  },

  {
    // Repositories own the SQL: services, controllers and processors call repository methods.
    files: NO_SQL_FILES,
    rules: {
      'no-restricted-imports': [
        'error',
        { name: '@nestjs/typeorm', message: 'Inject the feature repository (<name>.repository.ts) instead.' },
        { name: 'typeorm', message: 'TypeORM is used in repositories only; take a `Tx` from database/transactions.' },
      ],
      'no-restricted-syntax': [
        'error',
        {
          selector: 'CallExpression[callee.property.name=/^(query|createQueryBuilder|getRepository)$/]',
          message: 'SQL and query builders belong in the feature repository (<name>.repository.ts).',
        },
        {
          selector: `TemplateElement[value.raw=${SQL_START}]`,
          message: 'SQL text belongs in the feature repository (<name>.repository.ts).',
        },
        {
          selector: `Literal[value=${SQL_START}]`,
          message: 'SQL text belongs in the feature repository (<name>.repository.ts).',
        },
      ],
    },
  },

  {
    // Feature modules are not global: a module imports the modules whose providers it uses (docs/decisions/floors-and-features.md).
    // The floors (config, common, database, redis, jobs, lists, idempotency, server, batch) may be global.
    files: ['src/**/*.module.ts'],
    ignores: ['src/{config,common,database,redis,jobs,lists,idempotency,server,batch}/**'],
    rules: {
      'no-restricted-syntax': [
        'error',
        {
          selector: "Decorator > CallExpression[callee.name='Global']",
          message: 'Feature modules are not @Global(): import this module where its providers are used.',
        },
      ],
    },
  },

  {
    files: ['**/*.{js,mjs,cjs}'],
    extends: [js.configs.recommended],
    languageOptions: { globals: { ...globals.node } },
  },

  prettier,
);
