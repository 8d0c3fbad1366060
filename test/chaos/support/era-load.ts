/**
 * Steady client load from both eras for the chaos tier: 2025-11-25 clients with a session each (an inline
 * call, then a task: tools/call with params.task, tasks/get, a blocking tasks/result) and stateless
 * 2026-07-28 clients (an inline call, then a call that outlives the inline window and becomes a task, polled
 * with tasks/get to its result). Every HTTP exchange is counted; anything but a JSON-RPC result is a failure,
 * except the one answer the protocol tells a client to repeat (tasks/result "still running; call again"),
 * which is counted and repeated. Every loop is bounded by `stop()` and by a per-task deadline.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import {
  openSession,
  openStream,
  responseOf,
  rpc,
  sessionHeaders,
  type RpcAnswer,
} from '../../support/mcp-http.js';
import { asUser, freshUser, modern, rpcId } from '../../support/tasks-e2e.js';

export interface Failure {
  what: string;
  status: number;
  detail: string;
}

export interface LoadFigures {
  requests: number;
  failures: Failure[];
  tasksCompleted: number;
  failedTasks: Failure[];
  /** tasks/result answered "still running; call tasks/result again" (an instance draining), then repeated. */
  resultRetries: number;
  /** GET streams opened by the stream holders (each reopens its stream whenever it ends). */
  streamsOpened: number;
}

const TASK_DEADLINE_MS = 30000;

class Stop extends Error {}

export class EraLoad {
  private stopped = false;
  private readonly loops: Promise<void>[] = [];
  private readonly figures: LoadFigures = {
    requests: 0,
    failures: [],
    tasksCompleted: 0,
    failedTasks: [],
    resultRetries: 0,
    streamsOpened: 0,
  };

  constructor(
    private readonly url: string,
    private readonly opts: { taskSeconds: number; pauseMs?: number; rounds?: number },
  ) {}

  /**
   * Starts `legacy` session clients and `modern` stateless clients, each with its own user, and `streams`
   * 2025-11-25 sessions that only hold their GET stream open, as a client waiting for notifications does,
   * opening it again whenever it ends.
   */
  start(legacy: number, modernClients: number, streams = 0): void {
    for (let i = 0; i < legacy; i++) this.loops.push(this.loop((s) => this.legacyRound(s), 'legacy'));
    for (let i = 0; i < modernClients; i++) this.loops.push(this.loop((s) => this.modernRound(s), 'modern'));
    for (let i = 0; i < streams; i++) this.loops.push(this.holdStream());
  }

  /** One session's GET stream, held until stop() and reopened whenever the server ends it. */
  private async holdStream(): Promise<void> {
    const identity = asUser(freshUser('stream'));
    let sessionId: string;
    try {
      this.figures.requests += 2;
      sessionId = await openSession(this.url, {}, identity);
    } catch (err) {
      this.figures.failures.push({ what: 'stream initialize', status: 0, detail: String(err) });
      return;
    }
    const headers = { ...sessionHeaders(sessionId, identity), accept: 'text/event-stream' };
    while (!this.stopped) {
      this.figures.requests++;
      let stream: Awaited<ReturnType<typeof openStream>>;
      try {
        stream = await openStream(this.url, { method: 'GET', headers });
      } catch (err) {
        this.figures.failures.push({ what: 'legacy GET stream', status: 0, detail: String(err) });
        return;
      }
      if (stream.status !== 200) {
        stream.close();
        this.figures.failures.push({ what: 'legacy GET stream', status: stream.status, detail: '' });
        return;
      }
      this.figures.streamsOpened++;
      // Read until the server ends the stream (a drain) or the load stops.
      while (!this.stopped) {
        try {
          await stream.next(500);
        } catch (err) {
          if (err instanceof Error && err.message === 'no SSE event in time') continue;
          break;
        }
      }
      stream.close();
    }
  }

  /** Lets every client finish its round (no request is abandoned half way), then returns the figures. */
  async stop(): Promise<LoadFigures> {
    this.stopped = true;
    await Promise.all(this.loops);
    return this.figures;
  }

  /** Resolves when every client has done its `rounds` (only when started with a round count). */
  async done(): Promise<LoadFigures> {
    await Promise.all(this.loops);
    return this.figures;
  }

  get snapshot(): LoadFigures {
    return this.figures;
  }

  private async loop(round: (state: RoundState) => Promise<void>, era: string): Promise<void> {
    const state: RoundState = { user: freshUser(era) };
    for (let n = 0; !this.stopped && (this.opts.rounds === undefined || n < this.opts.rounds); n++) {
      try {
        await round(state);
      } catch (err) {
        if (!(err instanceof Stop)) {
          this.figures.failures.push({ what: `${era} client`, status: 0, detail: String(err) });
        }
      }
      if (this.opts.pauseMs) await sleep(this.opts.pauseMs);
    }
  }

  /** One exchange: counted, and a failure unless it carries a JSON-RPC result (or `accept` takes it). */
  private async exchange(
    what: string,
    send: () => Promise<RpcAnswer>,
    accept: (a: RpcAnswer) => boolean = (a) => a.status === 200 && responseOf(a)?.result !== undefined,
  ): Promise<RpcAnswer> {
    this.figures.requests++;
    let answer: RpcAnswer;
    try {
      answer = await send();
    } catch (err) {
      this.figures.failures.push({
        what,
        status: 0,
        detail: err instanceof Error ? err.message : String(err),
      });
      throw new Stop();
    }
    if (!accept(answer)) {
      this.figures.failures.push({ what, status: answer.status, detail: answer.text.slice(0, 300) });
      throw new Stop();
    }
    return answer;
  }

  private async legacyRound(state: RoundState): Promise<void> {
    const identity = asUser(state.user);
    if (!state.sessionId) {
      this.figures.requests += 2;
      try {
        state.sessionId = await openSession(this.url, {}, identity);
      } catch (err) {
        this.figures.failures.push({ what: 'legacy initialize', status: 0, detail: String(err) });
        throw new Stop();
      }
    }
    const headers = sessionHeaders(state.sessionId, identity);
    const call = (method: string, params: Record<string, unknown>) => () =>
      rpc(this.url, { jsonrpc: '2.0', id: rpcId(), method, params }, headers);
    await this.exchange('legacy tools/call', call('tools/call', { name: 'test_simple_text', arguments: {} }));
    const label = `l${rpcId()}`;
    const created = responseOf(
      await this.exchange(
        'legacy tools/call (task)',
        call('tools/call', {
          name: 'slow_compute',
          arguments: { seconds: this.opts.taskSeconds, label },
          task: {},
        }),
      ),
    ).result;
    const taskId = created.task.taskId as string;
    await this.exchange('legacy tasks/get', call('tasks/get', { taskId }));
    const deadline = Date.now() + TASK_DEADLINE_MS;
    for (;;) {
      const answer = await this.exchange('legacy tasks/result', call('tasks/result', { taskId }), (a) => {
        const r = responseOf(a);
        return a.status === 200 && (r?.result !== undefined || r?.error?.data?.taskId === taskId);
      });
      const r = responseOf(answer);
      if (r.result) {
        const text = r.result.content?.[0]?.text;
        const expected = `Computed ${label} after ${this.opts.taskSeconds} s`;
        if (text === expected) this.figures.tasksCompleted++;
        else
          this.figures.failedTasks.push({
            what: `legacy task ${taskId}`,
            status: 200,
            detail: JSON.stringify(r),
          });
        return;
      }
      // "The task is still running; call tasks/result again": what a draining instance answers a long wait.
      if (r.error.data.status && !['working', 'input_required'].includes(r.error.data.status)) {
        this.figures.failedTasks.push({
          what: `legacy task ${taskId}`,
          status: 200,
          detail: JSON.stringify(r),
        });
        return;
      }
      this.figures.resultRetries++;
      if (Date.now() > deadline) {
        this.figures.failedTasks.push({
          what: `legacy task ${taskId}`,
          status: 200,
          detail: 'no result in time',
        });
        return;
      }
    }
  }

  private async modernRound(state: RoundState): Promise<void> {
    const headers = asUser(state.user);
    const call = (method: string, params: Record<string, unknown>) => () =>
      modern(this.url, method, params, { headers });
    const inline = responseOf(
      await this.exchange(
        'modern tools/call',
        call('tools/call', { name: 'test_simple_text', arguments: {} }),
      ),
    ).result;
    if (inline.resultType === 'task') throw new Error('an instant call became a task');
    const label = `m${rpcId()}`;
    const created = responseOf(
      await this.exchange(
        'modern tools/call (task)',
        call('tools/call', { name: 'slow_compute', arguments: { seconds: this.opts.taskSeconds, label } }),
      ),
    ).result;
    const expected = `Computed ${label} after ${this.opts.taskSeconds} s`;
    if (created.resultType !== 'task') {
      // Answered inside the inline window after all (a fast machine): a result, not a task.
      if (created.content?.[0]?.text === expected) this.figures.tasksCompleted++;
      else
        this.figures.failedTasks.push({
          what: 'modern inline',
          status: 200,
          detail: JSON.stringify(created),
        });
      return;
    }
    const taskId = created.taskId as string;
    const deadline = Date.now() + TASK_DEADLINE_MS;
    for (;;) {
      const t = responseOf(await this.exchange('modern tasks/get', call('tasks/get', { taskId }))).result;
      if (t.status === 'completed') {
        if (JSON.stringify(t.result).includes(expected)) this.figures.tasksCompleted++;
        else
          this.figures.failedTasks.push({
            what: `modern task ${taskId}`,
            status: 200,
            detail: JSON.stringify(t),
          });
        return;
      }
      if (t.status !== 'working') {
        this.figures.failedTasks.push({
          what: `modern task ${taskId}`,
          status: 200,
          detail: JSON.stringify(t),
        });
        return;
      }
      if (Date.now() > deadline) {
        this.figures.failedTasks.push({
          what: `modern task ${taskId}`,
          status: 200,
          detail: 'not done in time',
        });
        return;
      }
      await sleep(100);
    }
  }
}

interface RoundState {
  user: string;
  sessionId?: string;
}

/** The first failures, one line each, for an assertion message. */
export function describeFailures(failures: Failure[], max = 10): string {
  return failures
    .slice(0, max)
    .map((f) => `${f.what}: ${f.status} ${f.detail}`)
    .join('\n');
}
