/**
 * `durable_steps` tasks followed through a chaos scenario (kill-resumable, rolling-restart-resumable):
 * created alternately in each era, polled with tasks/get until terminal, every status a client saw kept.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { responseOf } from '../../support/mcp-http.js';
import { LegacyClient, modern } from '../../support/tasks-e2e.js';
import { TERMINAL } from './chaos-kit.js';

/** What `durable_steps` answers (its structuredContent). */
export interface StepsResult {
  completedSteps: number;
  attempts: number;
  resumedFromStep: number;
}

export interface TrackedTask {
  taskId: string;
  era: 'legacy' | 'modern';
  /** Every status a tasks/get answered (the creation's included). */
  statuses: Set<string>;
  /** When a poll first saw it terminal (Date.now()). */
  doneAt?: number;
  /** The terminal tasks/get answer (a 2026-07-28 one carries the result). */
  final?: { status: string; statusMessage?: string; result?: { structuredContent?: unknown } };
}

export class DurableTasks {
  readonly tasks: TrackedTask[] = [];
  /** tasks/get polls that got no answer (an instance going away under the request). */
  pollsFailed = 0;
  private stopped = false;
  private polling: Promise<void> = Promise.resolve();

  /** `readUrl` picks the instance each poll asks (any one that should be up). */
  constructor(
    private readonly session: LegacyClient,
    private readonly readUrl: () => string,
  ) {}

  /** Creates a `durable_steps` task on `url`: legacy for even `n`, modern (as a task) for odd. */
  async create(url: string, n: number, args: { steps: number; stepMs: number }): Promise<void> {
    if (n % 2 === 0) {
      const t = await this.session.at(url).createTask('durable_steps', args);
      this.tasks.push({ taskId: t.taskId, era: 'legacy', statuses: new Set([t.status]) });
      return;
    }
    const r = responseOf(await modern(url, 'tools/call', { name: 'durable_steps', arguments: args })).result;
    if (r?.resultType !== 'task') throw new Error(`durable_steps answered inline: ${JSON.stringify(r)}`);
    this.tasks.push({ taskId: r.taskId, era: 'modern', statuses: new Set([r.status]) });
  }

  /** Polls every task not yet terminal, all at once, every `everyMs`, for at most `rounds` rounds or stop(). */
  startPolling(everyMs: number, rounds: number): void {
    this.polling = (async () => {
      for (let round = 0; round < rounds && !this.stopped; round++) {
        await Promise.all(this.tasks.filter((t) => !t.final).map((t) => this.poll(t)));
        if (this.allDone()) return;
        await sleep(everyMs);
      }
    })();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.polling;
  }

  allDone(): boolean {
    return this.tasks.every((t) => t.final);
  }

  /** Tasks that did not complete, or that a client ever saw failed. */
  failed(): TrackedTask[] {
    return this.tasks.filter((t) => t.final?.status !== 'completed' || t.statuses.has('failed'));
  }

  /** Each task's result (legacy: tasks/result on `url`; modern: from its final tasks/get). */
  async results(url: string): Promise<(StepsResult | undefined)[]> {
    return Promise.all(
      this.tasks.map(async (t) => {
        const content =
          t.era === 'legacy'
            ? (await this.session.at(url).call('tasks/result', { taskId: t.taskId }))?.result
                ?.structuredContent
            : t.final?.result?.structuredContent;
        return content as StepsResult | undefined;
      }),
    );
  }

  private async poll(t: TrackedTask): Promise<void> {
    let s: TrackedTask['final'];
    try {
      const url = this.readUrl();
      s =
        t.era === 'legacy'
          ? await this.session.at(url).result('tasks/get', { taskId: t.taskId })
          : responseOf(await modern(url, 'tasks/get', { taskId: t.taskId }))?.result;
    } catch {
      s = undefined; // the next poll asks again (another instance, for a rolling restart)
    }
    if (!s?.status) {
      this.pollsFailed++;
      return;
    }
    t.statuses.add(s.status);
    if (TERMINAL.has(s.status)) {
      t.final = s;
      t.doneAt = Date.now();
    }
  }
}
