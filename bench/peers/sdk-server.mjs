// Peer for bench/compare.mjs: the official TypeScript SDK (1.x) serving the same echo tools as
// src/tools/bench, over Streamable HTTP with Express, as its own examples do.
//
//   node bench/peers/sdk-server.mjs sessions|stateless|tasks   (prints "listening on http://127.0.0.1:PORT/mcp")
//
// sessions: one transport per Mcp-Session-Id (the SDK's stateful mode); stateless: a new server and transport per
// request, no session; tasks: sessions plus the SDK's experimental in-memory task store, so echo_task answers
// tools/call with params.task by a task handle and tasks/get|result read the store.
import { randomUUID } from 'node:crypto';
import * as z from 'zod/v4';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { createMcpExpressApp } from '@modelcontextprotocol/sdk/server/express.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import {
  InMemoryTaskMessageQueue,
  InMemoryTaskStore,
} from '@modelcontextprotocol/sdk/experimental/tasks/stores/in-memory.js';

const mode = process.argv[2] ?? 'sessions';
if (!['sessions', 'stateless', 'tasks'].includes(mode)) {
  console.error('usage: sdk-server.mjs sessions|stateless|tasks');
  process.exit(2);
}
const taskStore = mode === 'tasks' ? new InMemoryTaskStore() : undefined;
const echoShape = { text: z.string() };

function newServer() {
  const server = new McpServer(
    { name: 'sdk-peer', version: '1.0.0' },
    taskStore
      ? {
          capabilities: { tasks: { requests: { tools: { call: {} } }, list: {}, cancel: {} } },
          taskStore,
          taskMessageQueue: new InMemoryTaskMessageQueue(),
        }
      : {},
  );
  server.registerTool('echo', { description: 'echo', inputSchema: echoShape }, async ({ text }) => ({
    content: [{ type: 'text', text }],
  }));
  if (taskStore) {
    server.experimental.tasks.registerToolTask(
      'echo_task',
      { description: 'echo as a task', inputSchema: echoShape, execution: { taskSupport: 'optional' } },
      {
        async createTask({ text }, { taskStore: store, taskRequestedTtl }) {
          const task = await store.createTask({ ttl: taskRequestedTtl });
          // The work runs after the handle is returned, as a background job would.
          setImmediate(() => {
            store
              .storeTaskResult(task.taskId, 'completed', { content: [{ type: 'text', text }] })
              .catch(() => {});
          });
          return { task };
        },
        getTask: (_args, { taskId, taskStore: store }) => store.getTask(taskId),
        getTaskResult: (_args, { taskId, taskStore: store }) => store.getTaskResult(taskId),
      },
    );
  }
  return server;
}

const app = createMcpExpressApp();
const transports = new Map();

app.post('/mcp', async (req, res) => {
  if (mode === 'stateless') {
    const server = newServer();
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: undefined,
      enableJsonResponse: true,
    });
    res.on('close', () => {
      void transport.close();
      void server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(req, res, req.body);
    return;
  }
  const sid = req.headers['mcp-session-id'];
  let transport = typeof sid === 'string' ? transports.get(sid) : undefined;
  if (!transport) {
    if (sid !== undefined || !isInitializeRequest(req.body)) {
      res
        .status(400)
        .json({
          jsonrpc: '2.0',
          error: { code: -32000, message: 'Bad Request: no valid session' },
          id: null,
        });
      return;
    }
    transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      enableJsonResponse: true,
      onsessioninitialized: (id) => transports.set(id, transport),
    });
    transport.onclose = () => transport.sessionId && transports.delete(transport.sessionId);
    await newServer().connect(transport);
  }
  await transport.handleRequest(req, res, req.body);
});

app.delete('/mcp', async (req, res) => {
  const transport = transports.get(req.headers['mcp-session-id']);
  if (!transport) return void res.status(404).end();
  await transport.handleRequest(req, res);
});

const listener = app.listen(0, '127.0.0.1', () => {
  console.log(`listening on http://127.0.0.1:${listener.address().port}/mcp`);
});
process.on('SIGTERM', () => listener.close(() => process.exit(0)));
