/** Jest runs in native ESM mode (Nest 12 packages are ESM-only); see package.json "test". */
export default {
  testEnvironment: 'node',
  extensionsToTreatAsEsm: ['.ts'],
  moduleNameMapper: { '^(\\.{1,2}/.*)\\.js$': '$1' },
  transform: {
    '^.+\\.ts$': ['ts-jest', { useESM: true, tsconfig: 'tsconfig.json' }],
    'node_modules/@nestjs/throttler/.+\\.js$': '<rootDir>/test/support/cjs-esm-bridge.cjs',
  },
  transformIgnorePatterns: ['/node_modules/(?!@nestjs/throttler/)'],
  setupFiles: ['<rootDir>/test/support/esm-bridge.setup.ts'],
  roots: ['<rootDir>/src', '<rootDir>/test'],
  testMatch: ['**/*.spec.ts', '**/*.e2e-spec.ts'],
  testTimeout: 60000,
  maxWorkers: 2,
  // `npm test` passes --coverage: line coverage of src/ from the unit and service specs, which run in
  // this process (the e2e suites run the built app as child processes, so they add nothing here).
  collectCoverageFrom: ['src/**/*.ts', '!src/**/*.spec.ts', '!src/**/*.d.ts'],
  // istanbul (babel) counts executed statements; the v8 provider also counts never-called code that was merely loaded (68 % vs 43 %).
  coverageProvider: 'babel',
  coverageReporters: ['text-summary'],
};
