import { DataSource } from 'typeorm';
import { createTestDatabase, withClient, type TestDatabase } from '../../test/support/test-database.js';
import { runMigrationsLocked } from '../database/migrations-runner.js';
import { buildDataSourceOptions } from '../database/typeorm-options.js';
import { PrincipalRecord } from './principal-record.entity.js';
import { PrincipalsRepository } from './principals.repository.js';
import { principalIdFor, PrincipalsService, type AuthenticatedIdentity } from './principals.service.js';
import { SCHEMA } from '../schema.js';

describe('principals on real PostgreSQL', () => {
  let db: TestDatabase;
  let ds: DataSource;
  const newService = () => new PrincipalsService(new PrincipalsRepository(ds.getRepository(PrincipalRecord)));
  const lastSeen = async (id: string): Promise<Date> =>
    withClient(db.url, (c) => c.query('SELECT last_seen_at FROM principal WHERE id = $1', [id])).then(
      (r) => r.rows[0].last_seen_at as Date,
    );
  const ada: AuthenticatedIdentity = {
    provider: 'oidc',
    issuer: 'https://idp.example.test',
    subject: 'ada',
    name: 'Ada',
    scopes: ['a'],
    groups: [],
  };

  beforeAll(async () => {
    db = await createTestDatabase('principals');
    ds = new DataSource(buildDataSourceOptions({ url: db.url, poolMax: 2, schema: SCHEMA }));
    await ds.initialize();
    await runMigrationsLocked(ds);
  });
  afterAll(async () => {
    await ds.destroy();
    await db.drop();
  });

  it('derives stable ids: issuer + subject, provider + user, apikey + key id', () => {
    expect(principalIdFor(ada)).toBe(principalIdFor({ ...ada }));
    expect(principalIdFor(ada)).not.toBe(principalIdFor({ ...ada, issuer: 'https://other.example.test' }));
    expect(principalIdFor({ provider: 'proxy', subject: 'ada' })).toMatch(/^proxy:/);
    expect(principalIdFor({ provider: 'proxy', subject: 'ada' })).not.toBe(principalIdFor(ada));
    expect(principalIdFor({ provider: 'apikey', subject: 'abc' })).toBe('apikey:abc');
  });

  it('refuses a subject or group that is not a non-empty string, whichever strategy passed it on', async () => {
    const service = newService();
    const odd: unknown[] = ['', ' ', 42, { id: 'ada' }, null];
    for (const subject of odd) {
      await expect(service.resolve({ ...ada, subject: subject as string })).rejects.toMatchObject({
        reason: 'malformed',
      });
      await expect(service.resolve({ ...ada, groups: ['eng', subject as string] })).rejects.toMatchObject({
        reason: 'malformed',
      });
    }
    const rows = await withClient(db.url, (c) =>
      c.query(`SELECT subject FROM principal WHERE subject <> 'ada'`),
    );
    expect(rows.rows).toEqual([]);
  });

  it('writes last_seen_at at most once a minute, across replicas too, but at once when the name changes', async () => {
    const replicaA = newService();
    const p = await replicaA.resolve(ada);
    const first = await lastSeen(p.id);

    // Same replica: no query at all within the minute.
    await withClient(db.url, (c) =>
      c.query(`UPDATE principal SET last_seen_at = last_seen_at - interval '10 minutes' WHERE id = $1`, [
        p.id,
      ]),
    );
    const aged = await lastSeen(p.id);
    await replicaA.resolve(ada);
    expect(await lastSeen(p.id)).toEqual(aged);

    // Another replica with no memory of it: the SQL guard writes only because the row is older than a minute.
    const replicaB = newService();
    await replicaB.resolve(ada);
    const refreshed = await lastSeen(p.id);
    expect(refreshed.getTime()).toBeGreaterThanOrEqual(first.getTime());
    const replicaC = newService();
    await replicaC.resolve(ada);
    expect(await lastSeen(p.id)).toEqual(refreshed);

    // A new display name is written straight away.
    await replicaA.resolve({ ...ada, name: 'Ada L.' });
    const row = await withClient(db.url, (c) =>
      c.query('SELECT display_name FROM principal WHERE id = $1', [p.id]),
    );
    expect(row.rows[0].display_name).toBe('Ada L.');
  });

  it('keeps one row when the same principal signs in concurrently for the first time', async () => {
    const services = [newService(), newService(), newService(), newService()];
    const ids = await Promise.all(
      services.map((s) => s.resolve({ ...ada, subject: 'race' }).then((p) => p.id)),
    );
    expect(new Set(ids).size).toBe(1);
    const rows = await withClient(db.url, (c) => c.query(`SELECT id FROM principal WHERE subject = 'race'`));
    expect(rows.rowCount).toBe(1);
  });
});
