import type { INestApplication } from '@nestjs/common';
import { logs } from '@opentelemetry/api-logs';
import { InMemoryLogRecordExporter, LoggerProvider, SimpleLogRecordProcessor } from '@opentelemetry/sdk-logs';
import { DataSource } from 'typeorm';
import { createTestApp } from '../../test/support/test-app.js';
import { createTestDatabase, type TestDatabase } from '../../test/support/test-database.js';
import { inTransaction } from '../database/sql-transaction.js';
import { AuditTrail } from './audit-trail.service.js';

/**
 * When tracing is on, a row becomes a log record only once it committed: after the SqlTx's COMMIT, after
 * the TypeORM transaction's, never for a rollback. The SDK's own logger provider with its in-memory
 * exporter stands where the OTLP exporter would (test/e2e/audit-log-records.e2e-spec.ts covers that path).
 */
describe('audit log records follow the commit (real PostgreSQL, the OpenTelemetry logs SDK)', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let ds: DataSource;
  let audit: AuditTrail;
  const exporter = new InMemoryLogRecordExporter();
  const provider = new LoggerProvider({ processors: [new SimpleLogRecordProcessor({ exporter })] });
  const kinds = (): string[] =>
    exporter.getFinishedLogRecords().map((r) => r.attributes['mcp.audit.kind'] as string);

  beforeAll(async () => {
    logs.setGlobalLoggerProvider(provider);
    db = await createTestDatabase('audit_log_records');
    // Tracing "on" as the config sees it; the SDK itself is the provider registered above.
    app = await createTestApp(db.url, { JANITOR_ENABLED: 'false', OTEL_TRACES_EXPORTER: 'otlp' });
    ds = app.get(DataSource);
    audit = app.get(AuditTrail);
    await ds.query('CREATE TABLE audit_probe (id int PRIMARY KEY)');
  });
  afterAll(async () => {
    await app.close();
    await db.drop();
    await provider.shutdown();
    logs.disable();
  });
  beforeEach(() => exporter.reset());

  it('a task transaction: nothing before its COMMIT, every row after it, nothing after a rollback', async () => {
    await inTransaction(ds, { lockTimeoutMs: 1000 }, async (tx) => {
      await audit.record(tx, { kind: 'task.created', taskId: 'lr-1' });
      await audit.record(tx, { kind: 'task.attempt', taskId: 'lr-1', attempt: 1 });
      expect(kinds()).toEqual([]);
    });
    expect(kinds()).toEqual(['task.created', 'task.attempt']);
    expect(exporter.getFinishedLogRecords()[1].attributes).toMatchObject({
      'mcp.audit.task_id': 'lr-1',
      'mcp.audit.attempt': 1,
    });

    exporter.reset();
    await expect(
      inTransaction(ds, { lockTimeoutMs: 1000 }, async (tx) => {
        await tx.query('INSERT INTO audit_probe VALUES (1)');
        await audit.record(tx, { kind: 'task.created', taskId: 'lr-2' });
        await tx.query('INSERT INTO audit_probe VALUES (1)'); // duplicate key: the transaction rolls back
      }),
    ).rejects.toMatchObject({ code: '23505' });
    expect(kinds()).toEqual([]);
  });

  it('a TypeORM transaction: after its commit, never after its rollback; outside one, at once', async () => {
    await ds.transaction(async (m) => {
      await audit.record(m, { kind: 'api_key.created', detail: { keyId: 'k1' } });
      expect(kinds()).toEqual([]);
    });
    expect(kinds()).toEqual(['api_key.created']);

    exporter.reset();
    await expect(
      ds.transaction(async (m) => {
        await audit.record(m, { kind: 'api_key.revoked', detail: { keyId: 'k1' } });
        throw new Error('changed my mind');
      }),
    ).rejects.toThrow('changed my mind');
    expect(kinds()).toEqual([]);

    await audit.recordAlone({ kind: 'operator.action', detail: { command: 'probe' } });
    expect(kinds()).toEqual(['operator.action']);
    const rows = await ds.query<{ kind: string }[]>('SELECT kind FROM mcp_audit_event ORDER BY id');
    expect(rows.map((r) => r.kind)).toEqual([
      'task.created',
      'task.attempt',
      'api_key.created',
      'operator.action',
    ]);
  });
});
