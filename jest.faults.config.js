/** The fault suites (npm run test:faults): real processes, private PostgreSQL and Redis, run one at a time. */
import base from './jest.config.js';

export default {
  ...base,
  roots: ['<rootDir>/test/faults'],
  testMatch: ['**/*.fault-spec.ts'],
  testTimeout: 180000,
  maxWorkers: 1,
};
