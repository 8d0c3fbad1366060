import { randomBytes } from 'node:crypto';
import pg from 'pg';

export interface TestDatabase {
  url: string;
  name: string;
  drop(): Promise<void>;
}

function serverUrl(): string {
  const url = process.env.TEST_DATABASE_URL;
  if (!url) throw new Error('TEST_DATABASE_URL is not set; jest globalSetup should have set it');
  return url;
}

async function admin<T>(server: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const u = new URL(server);
  u.pathname = '/postgres';
  const client = new pg.Client({ connectionString: u.toString() });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/**
 * A fresh, empty database (`t_<label>_<random>`) on the test server (`server`, default TEST_DATABASE_URL), so
 * suites never see each other's rows. `drop()` removes it, closing any connection still open to it.
 */
export async function createTestDatabase(label: string, server = serverUrl()): Promise<TestDatabase> {
  const name = `t_${label.replace(/[^a-z0-9]/gi, '_').toLowerCase()}_${randomBytes(4).toString('hex')}`;
  await admin(server, (c) => c.query(`CREATE DATABASE "${name}"`));
  const u = new URL(server);
  u.pathname = `/${name}`;
  return {
    url: u.toString(),
    name,
    drop: () =>
      admin(server, (c) => c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`)).then(() => undefined),
  };
}

/** A plain pg client for assertions straight against the tables. */
export async function withClient<T>(url: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}
