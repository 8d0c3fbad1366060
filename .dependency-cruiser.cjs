// The layering rules of src/ (docs/architecture.md, "Layers"), checked in CI by `npm run lint:deps`.
// A rule names what may NOT be imported; everything else is allowed. Tests (*.spec.ts) integrate across
// layers on purpose and are left out of the layering rules, not of the cycle rule.

/** Platform code every feature builds on. It must never know about a feature. */
const INFRASTRUCTURE = '^src/(common|config|logging|metrics|database|bus|lifecycle|health|instances)/';
/** Features: the MCP surface, the registry, tools and their dispatch, identities, quotas, operations. */
const FEATURES =
  '^src/(gateway|protocol|tasks|sessions|tool-dispatch|tools|principals|quotas|janitor|telemetry|cli|testing|audit|admin)/';
const SPEC = '\\.(spec|int-spec|e2e-spec)\\.ts$';

module.exports = {
  forbidden: [
    {
      name: 'tasks-core-is-transport-free',
      comment:
        'The task registry core (tasks/ outside tasks/mcp/) is reached through its services; it never ' +
        'imports the HTTP transport (gateway/) or express.',
      severity: 'error',
      from: { path: '^src/tasks/', pathNot: ['^src/tasks/mcp/', SPEC] },
      to: { path: ['^src/gateway/', '^src/tasks/mcp/', '(^|/)node_modules/(express|@nestjs/platform-express)/'] },
    },
    {
      name: 'task-store-is-private',
      comment:
        'The task store (tasks/store/) is the only SQL for task rows. The task feature uses it, and so do the ' +
        'few readers that need rows themselves (janitor, admin console, CLI); every other module goes through ' +
        'the registry and execution services.',
      severity: 'error',
      from: {
        path: '^src/',
        pathNot: ['^src/tasks/', '^src/(janitor|admin|cli)/', SPEC],
      },
      to: { path: '^src/tasks/store/' },
    },
    {
      name: 'task-mcp-uses-the-store-only-for-outboxes',
      comment:
        'The MCP face of tasks (tasks/mcp/) reads and changes tasks through the registry; of the store it may ' +
        'use only the change publisher, to write an outbox row in the transaction that changes a task.',
      severity: 'error',
      from: { path: '^src/tasks/mcp/', pathNot: SPEC },
      to: { path: '^src/tasks/store/', pathNot: '^src/tasks/store/task-change-publisher\\.ts$' },
    },
    {
      name: 'tasks-mcp-is-transport-free',
      comment:
        'The MCP face of tasks reaches the transport only through the SessionStream port (protocol/), which ' +
        'gateway/ provides.',
      severity: 'error',
      from: { path: '^src/tasks/mcp/', pathNot: SPEC },
      to: { path: ['^src/gateway/', '(^|/)node_modules/(express|@nestjs/platform-express)/'] },
    },
    {
      name: 'gateway-does-not-implement-tasks-methods',
      comment:
        'gateway/ is transport only: it hands a request to the method registry (protocol/) and never imports ' +
        'the code that implements a tasks/* method.',
      severity: 'error',
      from: { path: '^src/gateway/', pathNot: SPEC },
      to: { path: '^src/tasks/mcp/' },
    },
    {
      name: 'tool-modules-use-the-tool-api-only',
      comment:
        'Team tool modules (tools/) see the tool-author API (tool-dispatch/), never the registry or the database.',
      severity: 'error',
      from: { path: '^src/tools/', pathNot: SPEC },
      to: { path: ['^src/tasks/', '^src/database/'] },
    },
    {
      name: 'infrastructure-never-imports-features',
      comment:
        'Infrastructure is configured by the composition root (app.module.ts, schema.ts); it never imports a ' +
        'feature (entity lists come from src/schema.ts, checks register themselves with health).',
      severity: 'error',
      from: { path: INFRASTRUCTURE, pathNot: SPEC },
      to: { path: [FEATURES, '^src/(app\\.module|app\\.setup|schema|main)\\.ts$'] },
    },
    {
      name: 'no-circular',
      comment:
        'A module cycle makes load order and DI order depend on who imports first. A cycle closed only by an ' +
        '`import type` is erased at compile time and allowed.',
      severity: 'error',
      from: { path: '^src/' },
      to: { circular: true, viaOnly: { dependencyTypesNot: ['type-only'] } },
    },
    {
      name: 'src-never-imports-tests',
      comment: 'Shipped code never loads test code (the test kit for tool authors lives in src/testing/).',
      severity: 'error',
      from: { path: '^src/', pathNot: SPEC },
      to: { path: '^test/' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^(dist|\.builds|coverage)/' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default', 'types'],
      extensions: ['.ts', '.js', '.mjs', '.cjs', '.json'],
    },
  },
};
