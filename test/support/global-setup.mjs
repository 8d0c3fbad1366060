// Jest loads global setup outside its module mapper, so this imports the launcher from the build that
// `npm test` makes first (the `pretest` script).
import { chmodSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startEmbeddedPostgres } from '../../dist/src/database/embedded-postgres.js';

/**
 * Tests need a real PostgreSQL. TEST_DATABASE_URL (or DATABASE_URL) names one; without either, an embedded
 * PostgreSQL is started in a temporary folder, so a laptop with nothing installed still runs every tier.
 * Each suite then creates its own database on that server (test/support/test-database.ts).
 */
export default async function globalSetup() {
  const url = process.env.TEST_DATABASE_URL ?? process.env.DATABASE_URL;
  if (url) {
    process.env.TEST_DATABASE_URL = url;
    return;
  }
  const parent = mkdtempSync(join(tmpdir(), 'mcp-test-'));
  // As root the postgres OS user must be able to enter the folder; mkdtemp makes it 0700.
  chmodSync(parent, 0o755);
  const handle = await startEmbeddedPostgres({
    dataDir: join(parent, 'data'),
    createOsUser: false,
    databaseName: 'mcp_test',
  });
  globalThis.__embeddedTestPg = handle;
  globalThis.__embeddedTestDir = parent;
  process.env.TEST_DATABASE_URL = handle.url;
}
