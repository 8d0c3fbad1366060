import { Injectable, Module } from '@nestjs/common';
import pg from 'pg';
import { McpTool, type ToolContext } from '../tool-dispatch/index.js';
import { McpTestServer } from './mcp-test-server.js';

@Injectable()
class ProbeTools {
  @McpTool({ name: 'probe_whoami', description: 'Says which era called.', taskSupport: 'optional' })
  whoami(_args: unknown, ctx: ToolContext): string {
    return `${ctx.era} ${ctx.protocolVersion}`;
  }
}

@Module({ providers: [ProbeTools] })
class ProbeModule {}

async function databaseExists(name: string): Promise<boolean> {
  const u = new URL(process.env.TEST_DATABASE_URL!);
  u.pathname = '/postgres';
  const client = new pg.Client({ connectionString: u.toString() });
  await client.connect();
  try {
    const { rowCount } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    return rowCount === 1;
  } finally {
    await client.end();
  }
}

describe('McpTestServer (testing kit, server level)', () => {
  it('serves exactly the chosen modules to both eras, and close() leaves nothing behind', async () => {
    const server = await McpTestServer.start({ modules: [ProbeModule], label: 'kit' });
    const name = server.database.name;
    let closed = false;
    try {
      expect(await databaseExists(name)).toBe(true);
      const client = await server.connect();
      const { tools } = await client.listTools();
      expect(tools.map((t) => t.name)).toEqual(['probe_whoami']);
      expect(await client.callTool({ name: 'probe_whoami', arguments: {} })).toEqual({
        content: [{ type: 'text', text: 'legacy 2025-11-25' }],
      });
      const modern = await server.modern().run('probe_whoami');
      expect(modern.result).toMatchObject({
        resultType: 'complete',
        content: [{ type: 'text', text: 'modern 2026-07-28' }],
      });
      await server.close();
      closed = true;
      expect(await databaseExists(name)).toBe(false);
      await expect(fetch(server.url, { method: 'POST' })).rejects.toThrow();
    } finally {
      if (!closed) await server.close();
    }
  });

  it('refuses to start with a bad tool module, and drops the database it created', async () => {
    @Injectable()
    class Broken {
      @McpTool({ name: 'bad name!', description: 'x' })
      run(): string {
        return '';
      }
    }
    @Module({ providers: [Broken] })
    class BrokenModule {}
    const label = `broken_${Date.now()}`;
    await expect(McpTestServer.start({ modules: [BrokenModule], label })).rejects.toThrow(/Broken\.run/);
    const u = new URL(process.env.TEST_DATABASE_URL!);
    u.pathname = '/postgres';
    const client = new pg.Client({ connectionString: u.toString() });
    await client.connect();
    try {
      const { rowCount } = await client.query('SELECT 1 FROM pg_database WHERE datname LIKE $1', [
        `t_${label}_%`,
      ]);
      expect(rowCount).toBe(0);
    } finally {
      await client.end();
    }
  });
});
