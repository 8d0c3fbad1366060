import type { JsonObject } from '../tool-dispatch/index.js';

export const MODERN_PROTOCOL_VERSION = '2026-07-28';
export const TASKS_EXTENSION = 'io.modelcontextprotocol/tasks';

/** A JSON-RPC error answer (`code`, `message`, `data`) with the HTTP status it came with. */
export class McpRpcError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data: unknown,
    readonly httpStatus: number,
  ) {
    super(message);
    this.name = 'McpRpcError';
  }
}

/** One request the server needs answered (`inputRequests` of an input_required result or task). */
export interface InputRequest {
  method: 'elicitation/create' | 'sampling/createMessage' | 'roots/list';
  params?: JsonObject;
}

/** The detailed task of `tasks/get` (2026-07-28). */
export interface ModernTask extends JsonObject {
  taskId: string;
  status: 'working' | 'input_required' | 'completed' | 'failed' | 'cancelled';
  statusMessage?: string;
  inputRequests?: Record<string, InputRequest>;
  result?: JsonObject & { content?: JsonObject[]; structuredContent?: JsonObject; isError?: boolean };
  error?: { code: number; message: string; data?: unknown };
}

export interface ModernClientOptions {
  /** Sent on every request (identity headers, say). */
  headers?: Record<string, string>;
  /** Client capabilities sent in each request's `_meta`. Default: elicitation, and the tasks extension. */
  capabilities?: JsonObject;
}

/** How a test answers the server's questions, by key: `(key, request) => response`. */
export type InputAnswerer = (key: string, request: InputRequest) => JsonObject | Promise<JsonObject>;

/** A tool result as the wire carries it; `S` types `structuredContent` (the test's claim, not a check). */
export type ModernToolResult<S = JsonObject> = JsonObject & {
  content?: JsonObject[];
  structuredContent?: S;
  isError?: boolean;
};

/**
 * One `tools/call` answer: `complete` (the tool result's fields alongside), `input_required` (an MRTR round:
 * `inputRequests` by key, and the opaque `requestState` to send back) or `task` (`taskId`).
 */
export type ModernCallReply<S = JsonObject> = ModernToolResult<S> & {
  resultType: string; // 'complete' | 'input_required' | 'task'
  taskId?: string;
  inputRequests?: Record<string, InputRequest>;
  requestState?: string;
};

/** What `callTool` sends back on the retry of an MRTR round. */
export interface InputRetry {
  /** The answers, by the keys of the round's `inputRequests` (e.g. `{ approval: { action: 'accept', … } }`). */
  inputResponses?: Record<string, JsonObject>;
  /** The round's `requestState`, unchanged, when it had one. */
  requestState?: string;
}

/** What `run` saw: the final tool result, the task (if the call became one), and the keys it answered. */
export interface ModernRun<S = JsonObject> {
  result: ModernToolResult<S>;
  task?: ModernTask;
  answeredKeys: string[];
}

const TERMINAL = new Set(['completed', 'failed', 'cancelled']);

/**
 * A small 2026-07-28 client over raw HTTP (the official SDK does not speak this era yet): no session, every
 * request carries its `_meta` and the matching `Mcp-*` headers, and the tasks extension is declared unless
 * `capabilities` says otherwise. Enough to test a task tool end to end:
 *
 * ```ts
 * const created = await client.callTool('generate_report', { steps: 3 });    // resultType 'task'
 * const parked = await client.waitForTask(created.taskId, ['input_required']);
 * await client.updateTask(created.taskId, { [key]: { action: 'accept', content: { ok: true } } });
 * const done = await client.waitForTask(created.taskId);                     // completed, with .result
 * ```
 *
 * An inline call that asks a question (no tasks extension, or answered within the inline window) ends with an
 * MRTR round instead; answer it by calling again with the answers and the round's `requestState`:
 *
 * ```ts
 * const round = await client.callTool('approve_refund', args);               // resultType 'input_required'
 * const final = await client.callTool<RefundOutcome>('approve_refund', args, {
 *   inputResponses: { approval: { action: 'accept', content: { approved: true } } },
 *   requestState: round.requestState,
 * });                                                                        // resultType 'complete'
 * ```
 */
export class ModernMcpClient {
  private nextId = 1;
  readonly capabilities: JsonObject;

  constructor(
    readonly url: string,
    private readonly options: ModernClientOptions = {},
  ) {
    this.capabilities = options.capabilities ?? { elicitation: {}, extensions: { [TASKS_EXTENSION]: {} } };
  }

  /** Sends one request; resolves with its result, rejects with McpRpcError for an error answer. */
  async request(method: string, params: JsonObject = {}, name?: string): Promise<JsonObject> {
    const mcpName = name ?? (typeof params.taskId === 'string' ? params.taskId : params.name);
    const res = await fetch(this.url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': MODERN_PROTOCOL_VERSION,
        'mcp-method': method,
        ...(typeof mcpName === 'string' ? { 'mcp-name': mcpName } : {}),
        ...this.options.headers,
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: this.nextId++,
        method,
        params: {
          ...params,
          _meta: {
            'io.modelcontextprotocol/protocolVersion': MODERN_PROTOCOL_VERSION,
            'io.modelcontextprotocol/clientCapabilities': this.capabilities,
            'io.modelcontextprotocol/clientInfo': { name: 'mcp-testing-kit', version: '1.0.0' },
          },
        },
      }),
    });
    const text = await res.text();
    const message = lastResponse(res.headers.get('content-type') ?? '', text);
    if (!message)
      throw new McpRpcError(
        -32603,
        `no JSON-RPC response (HTTP ${res.status}): ${text}`,
        undefined,
        res.status,
      );
    if (message.error) {
      const e = message.error;
      throw new McpRpcError(e.code, e.message, e.data, res.status);
    }
    return message.result as JsonObject;
  }

  /**
   * `tools/call`: `resultType` is `complete`, `input_required` (MRTR round) or `task` (with `taskId`).
   *
   * @param retry answers an `input_required` round: the same `name` and `args` again, with `inputResponses`
   *   keyed like the round's `inputRequests` and the round's `requestState` passed back unchanged. The server
   *   runs the tool again from the top with every answer; a handler with more questions gives another round.
   *   Leave it out on the first call. (A task's questions are answered with `updateTask` instead.)
   * @typeParam S the shape of `structuredContent` on a `complete` reply, so assertions need no cast.
   */
  async callTool<S = JsonObject>(
    name: string,
    args: JsonObject = {},
    retry: InputRetry = {},
  ): Promise<ModernCallReply<S>> {
    const params: JsonObject = { name, arguments: args };
    if (retry.inputResponses) params.inputResponses = retry.inputResponses;
    if (retry.requestState !== undefined) params.requestState = retry.requestState;
    return (await this.request('tools/call', params)) as ModernCallReply<S>;
  }

  async getTask(taskId: string): Promise<ModernTask> {
    return (await this.request('tasks/get', { taskId })) as ModernTask;
  }

  /** Answers some or all outstanding `inputRequests` of an input_required task. */
  async updateTask(taskId: string, inputResponses: Record<string, JsonObject>): Promise<void> {
    await this.request('tasks/update', { taskId, inputResponses });
  }

  async cancelTask(taskId: string): Promise<void> {
    await this.request('tasks/cancel', { taskId });
  }

  /**
   * Polls `tasks/get` until the task reaches one of `statuses` (default: any terminal status). The task's own
   * `pollIntervalMs` is ignored in favour of `intervalMs`, so tests stay quick.
   */
  async waitForTask(
    taskId: string,
    statuses: ModernTask['status'][] = ['completed', 'failed', 'cancelled'],
    { timeoutMs = 30_000, intervalMs = 50 } = {},
  ): Promise<ModernTask> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const task = await this.getTask(taskId);
      if (statuses.includes(task.status)) return task;
      if (TERMINAL.has(task.status)) {
        throw new Error(
          `task ${taskId} ended ${task.status}, not ${statuses.join('|')}: ${JSON.stringify(task)}`,
        );
      }
      if (Date.now() > deadline) throw new Error(`task ${taskId} still ${task.status} after ${timeoutMs} ms`);
      await new Promise((resolve) => setTimeout(resolve, intervalMs));
    }
  }

  /**
   * Calls a tool and sees it through: answers every MRTR round (by calling again with `inputResponses` and
   * `requestState`) and, when the call becomes a task, polls it and answers its input_required rounds with
   * `tasks/update`, until there is a final result. `answer` gets each question's key and request. `S` types
   * `result.structuredContent`.
   */
  async run<S = JsonObject>(
    name: string,
    args: JsonObject = {},
    answer: InputAnswerer = () => {
      throw new Error('the tool asked for input and no answerer was given');
    },
    options: { timeoutMs?: number } = {},
  ): Promise<ModernRun<S>> {
    const answeredKeys: string[] = [];
    const answerAll = async (requests: Record<string, InputRequest>) => {
      const responses: Record<string, JsonObject> = {};
      for (const [key, request] of Object.entries(requests)) {
        responses[key] = await answer(key, request);
        answeredKeys.push(key);
      }
      return responses;
    };
    let reply = await this.callTool<S>(name, args);
    while (reply.resultType === 'input_required') {
      const inputResponses = await answerAll(reply.inputRequests ?? {});
      reply = await this.callTool<S>(name, args, { inputResponses, requestState: reply.requestState });
    }
    if (reply.resultType !== 'task') return { result: reply, answeredKeys };
    const taskId = reply.taskId!;
    const deadline = Date.now() + (options.timeoutMs ?? 30_000);
    for (;;) {
      const task = await this.getTask(taskId);
      // Wire keys are unique over a task's life, so a request already answered is one the server has not
      // caught up with yet (the update is acknowledged before the task leaves input_required).
      const open = Object.entries(task.inputRequests ?? {}).filter(([key]) => !answeredKeys.includes(key));
      if (task.status === 'input_required' && open.length > 0) {
        await this.updateTask(taskId, await answerAll(Object.fromEntries(open)));
        continue;
      }
      // The task's result is the same tool result an inline call ends with; S names its structuredContent.
      if (task.status === 'completed' && task.result)
        return { result: task.result as ModernToolResult<S>, task, answeredKeys };
      if (TERMINAL.has(task.status)) {
        throw new Error(`task ${taskId} ended ${task.status}: ${JSON.stringify(task.error ?? task)}`);
      }
      if (Date.now() > deadline) throw new Error(`task ${taskId} still ${task.status} at the deadline`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
}

interface JsonRpcMessage {
  result?: unknown;
  error?: { code: number; message: string; data?: unknown };
}

/** The JSON-RPC response of an answer: the JSON body, or the last response event of an SSE body. */
function lastResponse(contentType: string, text: string): JsonRpcMessage | undefined {
  if (contentType.includes('application/json'))
    return text ? (JSON.parse(text) as JsonRpcMessage) : undefined;
  if (!contentType.includes('text/event-stream')) return undefined;
  const messages = text
    .split(/\r?\n\r?\n/)
    .map((block) =>
      block
        .split(/\r?\n/)
        .filter((line) => line.startsWith('data:'))
        .map((line) => line.slice(5).replace(/^ /, ''))
        .join('\n'),
    )
    .filter((data) => data.trim() !== '')
    .map((data) => JSON.parse(data) as JsonRpcMessage);
  return messages.reverse().find((m) => 'result' in m || 'error' in m);
}
