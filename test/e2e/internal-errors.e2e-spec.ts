import { Injectable, Logger, Module, type INestApplication } from '@nestjs/common';
import type { AddressInfo } from 'node:net';
import { DataSource } from 'typeorm';
import { AppLogger } from '../../src/logging/app-logger.js';
import { McpTool } from '../../src/tool-dispatch/index.js';
import { modernCall, responseOf } from '../support/mcp-http.js';
import { LegacyClient, waitFor } from '../support/tasks-e2e.js';
import { createTestApp } from '../support/test-app.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';

const SECRET_TABLE = 'payroll_secret_table';

/** A tool whose query fails inside PostgreSQL: a real driver error, with text that must stay server-side. */
@Injectable()
class FaultyTools {
  constructor(private readonly dataSource: DataSource) {}

  @McpTool({ name: 'db_fault', description: 'Queries a table that does not exist.', taskSupport: 'optional' })
  async dbFault(): Promise<string> {
    await this.dataSource.query(`SELECT * FROM ${SECRET_TABLE}`);
    return 'unreachable';
  }

  @McpTool({ name: 'own_error', description: 'Reports an error meant for the caller.' })
  ownError(): string {
    throw new Error('the input file is empty');
  }
}

@Module({ providers: [FaultyTools] })
class FaultyToolsModule {}

const INTERNAL = /^Internal error \(correlation id ([A-Za-z0-9._:-]+)\)$/;

describe('infrastructure errors never reach a client (real PostgreSQL errors over HTTP)', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let url: string;
  const logLines: string[] = [];

  beforeAll(async () => {
    db = await createTestDatabase('interr');
    app = await createTestApp(db.url, {}, [FaultyToolsModule]);
    url = `http://127.0.0.1:${(app.getHttpServer().address() as AddressInfo).port}/mcp`;
    Logger.overrideLogger(new AppLogger({ json: true, level: 'warn', write: (l) => logLines.push(l) }));
  });
  afterAll(async () => {
    Logger.overrideLogger(['error', 'warn']);
    await app.close();
    await db.drop();
  });

  it('turns a pg error thrown by a tool into a generic tool error quoting the correlation id (legacy era)', async () => {
    const client = await LegacyClient.open(url);
    const answer = await client.send('tools/call', { name: 'db_fault', arguments: {} });
    const result = responseOf(answer).result;
    expect(result.isError).toBe(true);
    const text: string = result.content[0].text;
    const id = INTERNAL.exec(text)?.[1];
    expect(id).toBe(answer.headers.get('x-request-id'));
    expect(answer.text).not.toContain(SECRET_TABLE);
    // The operator finds the driver text in the log under the same id.
    const logged = logLines
      .map((l) => JSON.parse(l) as Record<string, string>)
      .find((l) => l.msg.includes(`[${id}]`));
    expect(logged?.level).toBe('error');
    expect(logged?.msg).toContain(SECRET_TABLE);
  });

  it('keeps a tool error the tool meant for its caller as it is', async () => {
    const client = await LegacyClient.open(url);
    const result = await client.result('tools/call', { name: 'own_error', arguments: {} });
    expect(result).toEqual({ content: [{ type: 'text', text: 'the input file is empty' }], isError: true });
  });

  it('gives a task of such a tool the generic text as well', async () => {
    const client = await LegacyClient.open(url);
    const task = await client.createTask('db_fault');
    await waitFor(
      async () => (await client.result('tasks/get', { taskId: task.taskId })).status as string,
      (s) => s === 'failed' || s === 'completed',
      { what: 'the task to finish' },
    );
    const answer = await client.send('tasks/result', { taskId: task.taskId });
    expect(answer.text).not.toContain(SECRET_TABLE);
    const response = responseOf(answer);
    expect(response.result.isError).toBe(true);
    expect(response.result.content[0].text).toMatch(INTERNAL);
    const got = await client.send('tasks/get', { taskId: task.taskId });
    expect(got.text).not.toContain(SECRET_TABLE);
  });

  it('does the same in the 2026-07-28 era', async () => {
    const answer = await modernCall(
      url,
      1,
      'tools/call',
      { name: 'db_fault', arguments: {} },
      { name: 'db_fault' },
    );
    expect(answer.text).not.toContain(SECRET_TABLE);
    expect(responseOf(answer).result.content[0].text).toMatch(INTERNAL);
  });

  it('logs client mistakes at warn, one line without a stack', async () => {
    logLines.length = 0;
    const client = await LegacyClient.open(url);
    const response = await client.call('tasks/get', { taskId: 42 });
    expect(response.error.code).toBe(-32602);
    const lines = logLines.map((l) => JSON.parse(l) as Record<string, unknown>);
    const refusal = lines.find((l) => String(l.msg).includes('request refused (-32602)'));
    expect(refusal?.level).toBe('warn');
    expect(refusal?.stack).toBeUndefined();
    expect(lines.some((l) => l.level === 'error')).toBe(false);
  });
});
