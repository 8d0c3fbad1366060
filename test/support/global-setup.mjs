// Jest loads global setup outside its module mapper, so this imports the testing kit from the build that
// `npm test` makes first (the `pretest` script).
import { startTestPostgres } from '../../dist/src/testing/test-postgres.js';

/**
 * Tests need a real PostgreSQL. TEST_DATABASE_URL (or DATABASE_URL) names one; without either, an embedded
 * PostgreSQL is started in a temporary folder, so a laptop with nothing installed still runs every tier.
 * Each suite then creates its own database on that server (src/testing/test-database.ts).
 */
export default async function globalSetup() {
  const server = await startTestPostgres(process.env);
  if (server.embedded) globalThis.__embeddedTestPg = server;
  process.env.TEST_DATABASE_URL = server.url;
}
