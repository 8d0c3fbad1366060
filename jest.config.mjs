// Nest 12 ships ESM only, so jest runs in native ESM mode (see package.json "test").
// Three tiers told apart by suffix, one jest project each, so `--selectProjects <name>` runs one tier
// (`npm run test:unit`, `test:int`, `test:e2e`) and `npm test` runs all three:
//   unit  *.spec.ts, next to the code (and test/support, test/deploy): no database, no server process;
//   int   *.int-spec.ts against a real PostgreSQL;
//   e2e   *.e2e-spec.ts (test/e2e; anywhere under src/ or test/): real HTTP against the real AppModule or a
//         spawned server.

/** What every project shares (jest does not pass root options down to projects). */
export const common = {
  testEnvironment: 'node',
  rootDir: '.',
  extensionsToTreatAsEsm: ['.ts'],
  moduleNameMapper: { '^(\\.{1,2}/.*)\\.js$': '$1' },
  transform: {
    '^.+\\.ts$': [
      '@swc/jest',
      {
        jsc: {
          parser: { syntax: 'typescript', decorators: true },
          transform: { legacyDecorator: true, decoratorMetadata: true },
          target: 'es2023',
        },
      },
    ],
  },
};

/**
 * The real PostgreSQL (TEST_DATABASE_URL, or an embedded one) for the tiers that need it. Jest runs a global
 * setup module once per run however many selected projects name it, so int and e2e share one server.
 */
export const withPostgres = {
  globalSetup: '<rootDir>/test/support/global-setup.mjs',
  globalTeardown: '<rootDir>/test/support/global-teardown.mjs',
};

export default {
  testTimeout: 60000,
  projects: [
    { ...common, displayName: 'unit', roots: ['<rootDir>/src', '<rootDir>/test'], testRegex: '.*\\.spec\\.ts$' },
    {
      ...common,
      ...withPostgres,
      displayName: 'int',
      roots: ['<rootDir>/src', '<rootDir>/test'],
      testRegex: '.*\\.int-spec\\.ts$',
    },
    {
      ...common,
      ...withPostgres,
      displayName: 'e2e',
      // test/e2e by convention, but a team's server-level test next to its module (src/tools/<team>/) runs too.
      roots: ['<rootDir>/src', '<rootDir>/test'],
      testRegex: '.*\\.e2e-spec\\.ts$',
    },
  ],
};
