import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startEmbeddedPostgres } from '../database/embedded-postgres.js';

/** A PostgreSQL server tests may create databases on. */
export interface TestPostgres {
  url: string;
  /** Whether this process started it (and `stop` really stops it). */
  embedded: boolean;
  stop(): Promise<void>;
}

/**
 * The PostgreSQL server for tests: `TEST_DATABASE_URL` (or `DATABASE_URL`) when set; otherwise a real
 * PostgreSQL 15 (the embedded-postgres package) started in a temporary folder, which `stop` stops and deletes.
 * Jest's global setup (test/support/global-setup.mjs) calls this once per run and exports the URL as
 * TEST_DATABASE_URL, so every suite shares one server and creates its own database on it.
 */
export async function startTestPostgres(
  env: Record<string, string | undefined> = process.env,
): Promise<TestPostgres> {
  const url = env.TEST_DATABASE_URL ?? env.DATABASE_URL;
  if (url) return { url, embedded: false, stop: async () => undefined };
  const parent = mkdtempSync(join(tmpdir(), 'mcp-test-'));
  // As root the postgres OS user must be able to enter the folder; mkdtemp makes it 0700.
  chmodSync(parent, 0o755);
  try {
    const handle = await startEmbeddedPostgres({
      dataDir: join(parent, 'data'),
      createOsUser: false,
      databaseName: 'mcp_test',
    });
    return {
      url: handle.url,
      embedded: true,
      stop: async () => {
        await handle.stop();
        rmSync(parent, { recursive: true, force: true });
      },
    };
  } catch (err) {
    rmSync(parent, { recursive: true, force: true });
    throw err;
  }
}
