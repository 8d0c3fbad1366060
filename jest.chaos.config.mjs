// The chaos tier (`npm run test:chaos`): real server processes and real PostgreSQL, with failures injected
// (kill -9, SIGTERM, a database restart, a terminated LISTEN connection, a held row lock). Kept out of
// `npm test` (no project there matches *.chaos-spec.ts) because each scenario takes seconds to minutes.
import { common, withPostgres } from './jest.config.mjs';

export default {
  ...common,
  ...withPostgres,
  roots: ['<rootDir>/test/chaos'],
  testRegex: '.*\\.chaos-spec\\.ts$',
  // One scenario at a time: they measure recovery times on a small shared machine.
  maxWorkers: 1,
  testTimeout: 180000,
};
