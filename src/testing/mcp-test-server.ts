import 'reflect-metadata';
import type { DynamicModule, INestApplication, Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Client, type ClientOptions } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { AppModule } from '../app.module.js';
import { configureApp } from '../app.setup.js';
import { loadConfig } from '../app.config.js';
import { ModernMcpClient, type ModernClientOptions } from './modern-mcp-client.js';
import { createTestDatabase, type TestDatabase } from './test-database.js';
import { startTestPostgres, type TestPostgres } from './test-postgres.js';

export interface McpTestServerOptions {
  /** The tool modules the server serves (and only these). */
  modules: (Type | DynamicModule)[];
  /** Configuration, as environment variables (`TASK_INLINE_WINDOW_MS`, your module's own, ...). */
  env?: Record<string, string>;
  /** Database name label (`t_<label>_<random>`). */
  label?: string;
}

export interface ConnectOptions {
  /** What the client declares in `initialize` (`{ elicitation: {} }` to answer elicitations, say). */
  capabilities?: ClientOptions['capabilities'];
  /** Sent on every request (identity headers behind AUTH_PROVIDERS=proxy, say). */
  headers?: Record<string, string>;
}

/**
 * Server-level testing: the real application (AppModule, the production HTTP pipeline, migrations, the task
 * registry) serving the chosen tool modules on loopback, on a fresh database of the test PostgreSQL server
 * (TEST_DATABASE_URL, or an embedded one started for this server). Hands out official SDK clients for the
 * 2025-11-25 era and `ModernMcpClient`s for 2026-07-28. `close()` closes the clients and the server, drops the
 * database, and stops a PostgreSQL it started.
 *
 * ```ts
 * const server = await McpTestServer.start({ modules: [ReportsModule] });
 * const client = await server.connect();
 * const result = await client.callTool({ name: 'generate_report', arguments: { steps: 2 } });
 * await server.close();
 * ```
 */
export class McpTestServer {
  private readonly clients: Client[] = [];

  private constructor(
    readonly app: INestApplication,
    /** The `/mcp` endpoint. */
    readonly url: string,
    readonly database: TestDatabase,
    private readonly postgres: TestPostgres,
  ) {}

  static async start(options: McpTestServerOptions): Promise<McpTestServer> {
    const postgres = await startTestPostgres();
    let database: TestDatabase | undefined;
    let app: INestApplication | undefined;
    try {
      database = await createTestDatabase(options.label ?? 'tools', postgres.url);
      const config = loadConfig({
        LOG_LEVEL: 'warn',
        NODE_ENV: 'test',
        ...options.env,
        DATABASE_URL: database.url,
      });
      app = await NestFactory.create(AppModule.forRoot(config, { toolModules: options.modules }), {
        bodyParser: false,
        logger: ['error', 'warn'],
        abortOnError: false,
      });
      configureApp(app);
      await app.listen(0, '127.0.0.1');
      const url = `${(await app.getUrl()).replace('[::1]', '127.0.0.1')}/mcp`;
      return new McpTestServer(app, url, database, postgres);
    } catch (err) {
      await app?.close().catch(() => undefined);
      await database?.drop().catch(() => undefined);
      await postgres.stop().catch(() => undefined);
      throw err;
    }
  }

  /** An official SDK client, connected (initialize done) in the 2025-11-25 era; closed by `close()`. */
  async connect(options: ConnectOptions = {}): Promise<Client> {
    const client = new Client(
      { name: 'mcp-testing-kit', version: '1.0.0' },
      { capabilities: options.capabilities ?? {} },
    );
    const transport = new StreamableHTTPClientTransport(new URL(this.url), {
      ...(options.headers ? { requestInit: { headers: options.headers } } : {}),
    });
    await client.connect(transport);
    this.clients.push(client);
    return client;
  }

  /** A 2026-07-28 client (no session; the tasks extension declared unless `capabilities` says otherwise). */
  modern(options: ModernClientOptions = {}): ModernMcpClient {
    return new ModernMcpClient(this.url, options);
  }

  async close(): Promise<void> {
    for (const client of this.clients.splice(0)) await client.close().catch(() => undefined);
    try {
      await this.app.close();
    } finally {
      await this.database.drop();
      await this.postgres.stop();
    }
  }
}
