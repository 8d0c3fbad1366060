import type { INestApplication } from '@nestjs/common';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  LoggingMessageNotificationSchema,
  type LoggingMessageNotification,
  type Progress,
} from '@modelcontextprotocol/sdk/types.js';
import { LEGACY, openSession, openStream, rpc, sessionHeaders, type SseEvent } from '../support/mcp-http.js';
import { createTestApp, loopbackUrl } from '../support/test-app.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';

/**
 * The official TypeScript SDK client (1.x, Streamable HTTP) against the real server with the conformance
 * fixtures: what an off-the-shelf MCP host sees, end to end.
 */
describe('MCP over Streamable HTTP with the official SDK client', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let url: string;
  const clients: Client[] = [];

  async function connect(
    capabilities: Record<string, unknown> = {},
  ): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
    const client = new Client({ name: 'sdk-e2e', version: '1.0.0' }, { capabilities });
    const transport = new StreamableHTTPClientTransport(new URL(url), {
      reconnectionOptions: {
        initialReconnectionDelay: 50,
        maxReconnectionDelay: 200,
        reconnectionDelayGrowFactor: 1.5,
        maxRetries: 5,
      },
    });
    await client.connect(transport);
    clients.push(client);
    return { client, transport };
  }

  beforeAll(async () => {
    db = await createTestDatabase('sdk');
    app = await createTestApp(db.url, { MCP_CONFORMANCE_FIXTURES: 'true', SSE_RETRY_MS: '50' });
    url = await loopbackUrl(app, '/mcp');
  });
  afterAll(async () => {
    for (const c of clients) await c.close().catch(() => undefined);
    await app.close();
    await db.drop();
  });

  it('connects: initialize negotiates the latest version and hands out a session id', async () => {
    const { client, transport } = await connect();
    expect(transport.sessionId).toMatch(/^[\x21-\x7e]{16,}$/);
    expect(transport.protocolVersion).toBe(LEGACY);
    expect(client.getServerVersion()).toMatchObject({ name: 'mcp-task-server' });
    const caps = client.getServerCapabilities();
    expect(caps).toMatchObject({ tools: {}, resources: {}, prompts: {}, logging: {}, completions: {} });
    await expect(client.ping()).resolves.toEqual({});
  });

  it('lists tools with their input schemas and calls one', async () => {
    const { client } = await connect();
    const { tools } = await client.listTools();
    const byName = new Map(tools.map((t) => [t.name, t]));
    expect(byName.get('test_simple_text')?.inputSchema).toMatchObject({ type: 'object' });
    expect(byName.get('test_sampling')?.inputSchema).toMatchObject({
      type: 'object',
      properties: { prompt: { type: 'string' } },
      required: ['prompt'],
    });
    expect(byName.get('test_custom_headers')?.inputSchema.properties).toHaveProperty('region');
    const result = await client.callTool({ name: 'test_simple_text', arguments: {} });
    expect(result).toEqual({
      content: [{ type: 'text', text: 'This is a simple text response for testing.' }],
    });
  });

  it('reports a tool failure as an isError result and an unknown tool as an error', async () => {
    const { client } = await connect();
    const failed = await client.callTool({ name: 'test_error_handling', arguments: {} });
    expect(failed.isError).toBe(true);
    expect(failed.content).toEqual([
      { type: 'text', text: 'This tool intentionally returns an error for testing' },
    ]);
    await expect(client.callTool({ name: 'no_such_tool', arguments: {} })).rejects.toMatchObject({
      code: -32602,
    });
  });

  it('lists and reads resources: text, binary and a template', async () => {
    const { client } = await connect();
    const { resources } = await client.listResources();
    expect(resources.map((r) => r.uri)).toEqual(
      expect.arrayContaining(['test://static-text', 'test://static-binary']),
    );
    const { resourceTemplates } = await client.listResourceTemplates();
    expect(resourceTemplates.map((t) => t.uriTemplate)).toContain('test://template/{id}/data');

    const text = await client.readResource({ uri: 'test://static-text' });
    expect(text.contents).toEqual([
      {
        uri: 'test://static-text',
        mimeType: 'text/plain',
        text: 'This is the content of the static text resource.',
      },
    ]);
    const binary = await client.readResource({ uri: 'test://static-binary' });
    expect(binary.contents[0]).toMatchObject({ uri: 'test://static-binary', mimeType: 'image/png' });
    const blob = (binary.contents[0] as { blob: string }).blob;
    expect(Buffer.from(blob, 'base64').subarray(1, 4).toString('latin1')).toBe('PNG');
    const templated = await client.readResource({ uri: 'test://template/42/data' });
    expect(JSON.parse((templated.contents[0] as { text: string }).text)).toEqual({
      id: '42',
      templateTest: true,
      data: 'Data for ID: 42',
    });
    await expect(client.readResource({ uri: 'test://nothing-here' })).rejects.toMatchObject({
      code: -32002,
    });
  });

  it('gets a prompt with arguments and completes an argument', async () => {
    const { client } = await connect();
    const prompt = await client.getPrompt({
      name: 'test_prompt_with_arguments',
      arguments: { arg1: 'alpha', arg2: 'beta' },
    });
    expect(prompt.messages).toEqual([
      { role: 'user', content: { type: 'text', text: "Prompt with arguments: arg1='alpha', arg2='beta'" } },
    ]);
    const completion = await client.complete({
      ref: { type: 'ref/prompt', name: 'test_prompt_with_arguments' },
      argument: { name: 'arg1', value: 'par' },
    });
    expect(completion.completion.values).toEqual(['paris', 'park', 'party']);
  });

  it('delivers progress notifications 0, 50 and 100 to onprogress, then the result', async () => {
    const { client } = await connect();
    const seen: Progress[] = [];
    const result = await client.callTool({ name: 'test_tool_with_progress', arguments: {} }, undefined, {
      onprogress: (p) => seen.push(p),
    });
    expect(seen.map((p) => p.progress)).toEqual([0, 50, 100]);
    expect(seen.every((p) => p.total === 100)).toBe(true);
    expect(result.content).toEqual([{ type: 'text', text: 'Progress test completed' }]);
  });

  it('honours logging/setLevel: three info messages at info, none at error', async () => {
    const { client } = await connect();
    const messages: LoggingMessageNotification['params'][] = [];
    client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
      messages.push(n.params);
    });
    await client.setLoggingLevel('info');
    await client.callTool({ name: 'test_tool_with_logging', arguments: {} });
    expect(messages.map((m) => [m.level, m.data])).toEqual([
      ['info', 'Tool execution started'],
      ['info', 'Tool processing data'],
      ['info', 'Tool execution completed'],
    ]);
    messages.length = 0;
    await client.setLoggingLevel('error');
    const r = await client.callTool({ name: 'test_tool_with_logging', arguments: {} });
    expect(r.content).toEqual([{ type: 'text', text: 'Logging test completed' }]);
    expect(messages).toEqual([]);
  });

  it('answers an elicitation request from the tool and gets the answer back in the result', async () => {
    const { client } = await connect({ elicitation: { form: {} } });
    const asked: unknown[] = [];
    client.setRequestHandler(ElicitRequestSchema, (req) => {
      asked.push(req.params);
      return { action: 'accept', content: { username: 'ada', email: 'ada@example.com' } };
    });
    const result = await client.callTool({
      name: 'test_elicitation',
      arguments: { message: 'Who are you?' },
    });
    expect(asked).toEqual([
      expect.objectContaining({
        message: 'Who are you?',
        requestedSchema: expect.objectContaining({ required: ['username', 'email'] }),
      }),
    ]);
    expect(result.content).toEqual([
      {
        type: 'text',
        text: 'User response: action=accept, content={"username":"ada","email":"ada@example.com"}',
      },
    ]);
  });

  it('answers a sampling request from the tool', async () => {
    const { client } = await connect({ sampling: {} });
    client.setRequestHandler(CreateMessageRequestSchema, (req) => {
      const first = req.params.messages[0].content as { type: string; text: string };
      return {
        role: 'assistant',
        model: 'test-model',
        content: { type: 'text', text: `echo:${first.text}` },
      };
    });
    const result = await client.callTool({ name: 'test_sampling', arguments: { prompt: 'capital?' } });
    expect(result.content).toEqual([{ type: 'text', text: 'LLM response: echo:capital?' }]);
  });

  it('refuses sampling for a client without the capability, as a tool error', async () => {
    const { client } = await connect();
    const result = await client.callTool({ name: 'test_sampling', arguments: { prompt: 'x' } });
    expect(result.isError).toBe(true);
    expect(JSON.stringify(result.content)).toMatch(/sampling capability/);
  });

  it('completes test_reconnection: the server drops the POST stream, the SDK resumes with Last-Event-ID', async () => {
    const { client } = await connect();
    const tokens: string[] = [];
    const result = await client.callTool({ name: 'test_reconnection', arguments: {} }, undefined, {
      onresumptiontoken: (t) => tokens.push(t),
    });
    expect(result.content).toEqual([{ type: 'text', text: 'Reconnection test completed' }]);
    // The priming event and then the result on the resumed stream: two distinct event ids, same stream.
    expect(tokens.length).toBeGreaterThanOrEqual(2);
    expect(new Set(tokens).size).toBe(tokens.length);
    const streams = new Set(tokens.map((t) => t.slice(0, t.lastIndexOf('_'))));
    expect(streams.size).toBe(1);
  });

  it('terminateSession ends the session: a client still holding the old id gets a 404 error', async () => {
    const { transport } = await connect();
    const old = transport.sessionId!;
    // A second SDK client reconnecting to the same session (no initialize) is served while it lives...
    const resumedTransport = new StreamableHTTPClientTransport(new URL(url), { sessionId: old });
    const resumed = new Client({ name: 'sdk-e2e-resumed', version: '1.0.0' });
    await resumed.connect(resumedTransport);
    clients.push(resumed);
    resumedTransport.setProtocolVersion(LEGACY);
    await expect(resumed.listTools()).resolves.toHaveProperty('tools');

    await transport.terminateSession();
    expect(transport.sessionId).toBeUndefined();
    // ...and refused with HTTP 404 once it has ended.
    await expect(resumed.listTools()).rejects.toMatchObject({ code: 404 });
    const raw = await rpc(url, { jsonrpc: '2.0', id: 1, method: 'tools/list' }, sessionHeaders(old));
    expect(raw.status).toBe(404);
    expect(raw.json.error.code).toBe(-32001);
  });

  describe('a dropped POST stream resumed by hand with GET + Last-Event-ID', () => {
    const idOf = (e: SseEvent): string => e.id ?? '';
    const streamOf = (id: string): string => id.slice(0, id.lastIndexOf('_'));

    it('replays exactly the missed events of that stream, once, then the response', async () => {
      const session = await openSession(url);
      // A GET stream on the same session: its events must never leak into the resumed POST stream.
      const standalone = await openStream(url, {
        method: 'GET',
        headers: { accept: 'text/event-stream', ...sessionHeaders(session) },
      });
      const standalonePriming = await standalone.next();

      const post = await openStream(url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          ...sessionHeaders(session),
        },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 5,
          method: 'tools/call',
          params: { name: 'test_tool_with_progress', arguments: {}, _meta: { progressToken: 'pt-1' } },
        }),
      });
      expect(post.headers.get('content-type')).toMatch(/^text\/event-stream/);
      const priming = await post.next();
      expect(priming.id).toBeDefined();
      expect(priming.data).toBe('');
      expect(priming.retry).toBe(50);
      const first = await post.next();
      expect(first.json).toMatchObject({
        method: 'notifications/progress',
        params: { progressToken: 'pt-1', progress: 0 },
      });
      post.close();
      // Let the tool finish while nobody listens: the rest waits in the event log.
      await new Promise((r) => setTimeout(r, 400));

      const resumed = await rpc(
        url,
        undefined,
        { ...sessionHeaders(session), 'last-event-id': idOf(first) },
        'GET',
      );
      expect(resumed.status).toBe(200);
      const events = resumed.events.filter((e) => e.data !== '');
      expect(events.map((e) => e.json.params?.progress ?? 'response')).toEqual([50, 100, 'response']);
      expect(events[2].json).toMatchObject({
        id: 5,
        result: { content: [{ type: 'text', text: 'Progress test completed' }] },
      });
      const ids = events.map(idOf);
      expect(ids).not.toContain(idOf(first));
      expect(ids).not.toContain(idOf(priming));
      expect(new Set(ids).size).toBe(ids.length);
      expect(new Set(ids.map(streamOf))).toEqual(new Set([streamOf(idOf(priming))]));
      expect(streamOf(idOf(standalonePriming))).not.toBe(streamOf(idOf(priming)));
      // Resuming once more from the last event replays nothing (the stream is complete).
      const again = await rpc(
        url,
        undefined,
        { ...sessionHeaders(session), 'last-event-id': ids[ids.length - 1] },
        'GET',
      );
      expect(again.events.filter((e) => e.data !== '')).toEqual([]);
      standalone.close();
    });

    it('test_reconnection: the server closes the stream itself, the result waits for the GET', async () => {
      const session = await openSession(url);
      const post = await openStream(url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          ...sessionHeaders(session),
        },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 'r1',
          method: 'tools/call',
          params: { name: 'test_reconnection', arguments: {} },
        }),
      });
      const priming = await post.next();
      expect(priming.id).toBeDefined();
      await expect(post.next(2000)).rejects.toThrow('stream ended');
      const resumed = await rpc(
        url,
        undefined,
        { ...sessionHeaders(session), 'last-event-id': priming.id! },
        'GET',
      );
      const events = resumed.events.filter((e) => e.data !== '');
      expect(events).toHaveLength(1);
      expect(events[0].json).toEqual({
        jsonrpc: '2.0',
        id: 'r1',
        result: { content: [{ type: 'text', text: 'Reconnection test completed' }] },
      });
    });
  });
});
