import { InstancesConfig } from '../instances/instances.config.js';
import { isTerminal, TASK_STATUSES, type TaskStatus } from '../tasks/task-state.js';
import { redriveOf } from '../tasks/execution/task-redrive.js';
import { TasksConfig } from '../tasks/tasks.config.js';
import type { Task } from '../tasks/task.entity.js';
import { TaskError, TaskErrorCode } from '../tasks/tasks.errors.js';
import {
  allowOnly,
  boolFlag,
  CliUsageError,
  ExitCode,
  intFlag,
  parseArgs,
  parseDuration,
  positional,
  stringFlag,
} from './cli-args.js';
import type { CliServices } from './cli-context.js';

export interface CliIo {
  out(line: string): void;
  err(line: string): void;
  /** Resolves once what `out` wrote has been taken by the reader (stdout's backpressure); optional. */
  drain?(): Promise<void>;
}

const iso = (d: Date | null | undefined): string => (d ? d.toISOString() : '-');

/** Tab-separated rows under a header: readable, and `cut -f` friendly. */
function table(io: CliIo, header: string[], rows: (string | number)[][]): void {
  io.out(header.join('\t'));
  for (const r of rows) io.out(r.map((c) => String(c)).join('\t'));
}

/**
 * What the CLI shows of a task. Arguments, saved handler state and input answers are left out: they are the
 * caller's data, not what an operator needs to act on a task.
 */
function taskView(t: Task): Record<string, unknown> {
  return {
    id: t.id,
    ownerId: t.ownerId,
    sessionId: t.sessionId,
    era: t.era,
    toolName: t.toolName,
    status: t.status,
    statusMessage: t.statusMessage,
    createdAt: iso(t.createdAt),
    lastUpdatedAt: iso(t.lastUpdatedAt),
    expiresAt: iso(t.expiresAt),
    ttlMs: t.ttlMs,
    instanceId: t.instanceId,
    leaseExpiresAt: t.leaseExpiresAt ? iso(t.leaseExpiresAt) : null,
    generation: Number(t.generation),
    inputRounds: t.inputRounds,
    error: t.error,
    resultIsError: t.result ? t.result.isError === true : null,
    redrivenFrom: t.redrivenFrom,
  };
}

export async function runTasksCommand(args: string[], s: CliServices, io: CliIo): Promise<ExitCode> {
  const parsed = parseArgs(args, ['owner', 'status', 'tool', 'older-than', 'newer-than', 'limit', 'reason']);
  const json = boolFlag(parsed, 'json');
  switch (parsed.words[0]) {
    case 'list': {
      allowOnly(parsed, ['owner', 'status', 'tool', 'older-than', 'newer-than', 'limit', 'json']);
      positional(parsed, []);
      const statuses = stringFlag(parsed, 'status')
        ?.split(',')
        .map((x) => x.trim());
      for (const st of statuses ?? []) {
        if (!(TASK_STATUSES as readonly string[]).includes(st)) {
          throw new CliUsageError(`--status must be among ${TASK_STATUSES.join(', ')}`);
        }
      }
      const olderThan = stringFlag(parsed, 'older-than');
      const newerThan = stringFlag(parsed, 'newer-than');
      const now = Date.now();
      const rows = await s.tasksAdmin.list({
        ownerId: stringFlag(parsed, 'owner'),
        statuses: statuses as TaskStatus[] | undefined,
        toolName: stringFlag(parsed, 'tool'),
        createdBefore: olderThan ? new Date(now - parseDuration(olderThan, '--older-than')) : undefined,
        createdAfter: newerThan ? new Date(now - parseDuration(newerThan, '--newer-than')) : undefined,
        limit: intFlag(parsed, 'limit', 1, 10_000, 100),
      });
      if (json) io.out(JSON.stringify(rows.map(taskView), null, 2));
      else
        table(
          io,
          ['id', 'status', 'tool', 'owner', 'created', 'updated', 'instance', 'message'],
          rows.map((t) => [
            t.id,
            t.status,
            t.toolName,
            t.ownerId,
            iso(t.createdAt),
            iso(t.lastUpdatedAt),
            t.instanceId ?? '-',
            t.statusMessage ?? '',
          ]),
        );
      return ExitCode.OK;
    }
    case 'show': {
      allowOnly(parsed, ['json']);
      const [id] = positional(parsed, ['TASK_ID']);
      const t = await s.tasksAdmin.findById(id);
      if (!t) {
        io.err(`no task with id ${id}`);
        return ExitCode.FAILED;
      }
      // Both directions of a redrive: the task this one retried, and the tasks that retried this one.
      const view = { ...taskView(t), redrivenAs: await s.tasksAdmin.redrivenAs(t.id) };
      if (json) io.out(JSON.stringify(view, null, 2));
      else
        for (const [k, v] of Object.entries(view))
          io.out(`${k}: ${v !== null && typeof v === 'object' ? JSON.stringify(v) : String(v)}`);
      return ExitCode.OK;
    }
    case 'cancel': {
      allowOnly(parsed, ['reason', 'json']);
      const [id] = positional(parsed, ['TASK_ID']);
      const found = await s.tasksAdmin.findById(id);
      if (!found) {
        io.err(`no task with id ${id}`);
        return ExitCode.FAILED;
      }
      // The owner-scoped cancel of the server itself: same row lock, same generation bump (the worker's
      // later writes are fenced off), same NOTIFY (the instance running it aborts the handler).
      const res = await s.tasks.cancelIfLive(
        found.ownerId,
        id,
        stringFlag(parsed, 'reason') ?? 'Cancelled by an operator',
      );
      if (!res) {
        io.err(`no task with id ${id}`);
        return ExitCode.FAILED;
      }
      if (res.applied) await s.countCancelled(found);
      if (json) io.out(JSON.stringify({ cancelled: res.applied, task: { id, status: res.task.status } }));
      if (!res.applied) {
        io.err(`task ${id} is already ${res.task.status}; nothing to cancel`);
        return ExitCode.NOT_APPLIED;
      }
      if (!json) io.out(`cancelled ${id}`);
      return ExitCode.OK;
    }
    case 'retry': {
      allowOnly(parsed, ['json']);
      const [id] = positional(parsed, ['TASK_ID']);
      const old = await s.tasksAdmin.findById(id);
      if (!old) {
        io.err(`no task with id ${id}`);
        return ExitCode.FAILED;
      }
      if (!isTerminal(old.status)) {
        io.err(
          `task ${id} is still ${old.status}: only a completed, failed or cancelled task can be retried ` +
            `(cancel it first: tasks cancel ${id})`,
        );
        return ExitCode.NOT_APPLIED;
      }
      // A new task, queued: any running server with a free slot claims it and runs it as the owner.
      const task = await s.creations.insertWithLimits(
        redriveOf(old, s.config.get(TasksConfig).TASK_LEASE_MS),
        s.creationLimits,
      );
      io.out(json ? JSON.stringify({ id: task.id, redrivenFrom: id, status: task.status }) : task.id);
      return ExitCode.OK;
    }
    default:
      throw new CliUsageError(
        parsed.words[0] ? `unknown tasks command ${parsed.words[0]}` : 'tasks needs a command',
      );
  }
}

export async function runSessionsCommand(args: string[], s: CliServices, io: CliIo): Promise<ExitCode> {
  const parsed = parseArgs(args, ['principal', 'limit']);
  const json = boolFlag(parsed, 'json');
  switch (parsed.words[0]) {
    case 'list': {
      allowOnly(parsed, ['principal', 'limit', 'all', 'json']);
      positional(parsed, []);
      const rows = await s.sessionsAdmin.list({
        principalId: stringFlag(parsed, 'principal'),
        includeEnded: boolFlag(parsed, 'all'),
        limit: intFlag(parsed, 'limit', 1, 10_000, 100),
      });
      const view = rows.map((r) => ({
        id: r.id,
        principalId: r.principalId,
        protocolVersion: r.protocolVersion,
        clientName: typeof r.clientInfo?.name === 'string' ? r.clientInfo.name : null,
        createdAt: iso(r.createdAt),
        lastSeenAt: iso(r.lastSeenAt),
        endedAt: r.endedAt ? iso(r.endedAt) : null,
      }));
      if (json) io.out(JSON.stringify(view, null, 2));
      else
        table(
          io,
          ['id', 'principal', 'protocol', 'client', 'created', 'last_seen', 'ended'],
          view.map((v) => [
            v.id,
            v.principalId,
            v.protocolVersion,
            v.clientName ?? '-',
            v.createdAt,
            v.lastSeenAt,
            v.endedAt ?? '-',
          ]),
        );
      return ExitCode.OK;
    }
    case 'end': {
      allowOnly(parsed, ['json']);
      const [id] = positional(parsed, ['SESSION_ID']);
      const session = await s.sessions.findById(id);
      if (!session) {
        io.err(`no session with id ${id}`);
        return ExitCode.FAILED;
      }
      if (session.endedAt) {
        io.err(`session ${id} already ended at ${iso(session.endedAt)}`);
        if (json) io.out(JSON.stringify({ ended: false, id }));
        return ExitCode.NOT_APPLIED;
      }
      // What DELETE /mcp does: the session's next request on any instance gets 404.
      await s.endSession(id);
      io.out(json ? JSON.stringify({ ended: true, id }) : `ended ${id}`);
      return ExitCode.OK;
    }
    default:
      throw new CliUsageError(
        parsed.words[0] ? `unknown sessions command ${parsed.words[0]}` : 'sessions needs a command',
      );
  }
}

export async function runInstancesCommand(args: string[], s: CliServices, io: CliIo): Promise<ExitCode> {
  const parsed = parseArgs(args, []);
  if (parsed.words[0] !== 'list') {
    throw new CliUsageError(
      parsed.words[0] ? `unknown instances command ${parsed.words[0]}` : 'instances needs a command',
    );
  }
  allowOnly(parsed, ['all', 'json']);
  positional(parsed, []);
  const rows = await s.instancesAdmin.list(boolFlag(parsed, 'all'));
  // The janitor treats an instance as gone after three missed heartbeats; so does this view.
  const silentAfterMs = 3 * s.config.get(InstancesConfig).INSTANCE_HEARTBEAT_MS;
  const now = Date.now();
  const view = rows.map((r) => ({
    id: r.id,
    hostname: r.hostname,
    pid: r.pid,
    version: r.version,
    role: r.role,
    state: r.stoppedAt ? 'stopped' : now - r.heartbeatAt.getTime() > silentAfterMs ? 'silent' : 'alive',
    startedAt: iso(r.startedAt),
    heartbeatAt: iso(r.heartbeatAt),
    stoppedAt: r.stoppedAt ? iso(r.stoppedAt) : null,
    liveTasks: r.liveTasks,
  }));
  if (boolFlag(parsed, 'json')) io.out(JSON.stringify(view, null, 2));
  else
    table(
      io,
      ['id', 'state', 'role', 'hostname', 'pid', 'version', 'started', 'heartbeat', 'live_tasks'],
      view.map((v) => [
        v.id,
        v.state,
        v.role,
        v.hostname,
        v.pid,
        v.version,
        v.startedAt,
        v.heartbeatAt,
        v.liveTasks,
      ]),
    );
  return ExitCode.OK;
}

export async function runJanitorCommand(args: string[], s: CliServices, io: CliIo): Promise<ExitCode> {
  const parsed = parseArgs(args, []);
  if (parsed.words[0] !== 'run-once') {
    throw new CliUsageError(
      parsed.words[0] ? `unknown janitor command ${parsed.words[0]}` : 'janitor needs a command',
    );
  }
  allowOnly(parsed, ['json']);
  positional(parsed, []);
  // The server's own sweep, under the same transaction-scoped advisory lock: it never races a running one.
  const report = await s.janitor.runOnce();
  await s.recordOperatorAction({ command: 'janitor run-once', result: report.result, rows: report.rows }, io);
  if (boolFlag(parsed, 'json')) io.out(JSON.stringify(report));
  else {
    io.out(`result: ${report.result}`);
    for (const [step, n] of Object.entries(report.rows)) io.out(`${step}: ${n}`);
  }
  if (report.result === 'skipped') {
    io.err('another instance is sweeping right now (it holds the janitor lock); nothing was done');
    return ExitCode.NOT_APPLIED;
  }
  return ExitCode.OK;
}

/** A locked task row (another transaction holds it beyond TASK_LOCK_TIMEOUT_MS) is a retryable failure. */
export function describeCommandError(err: unknown): string | undefined {
  if (err instanceof TaskError && err.code === TaskErrorCode.TASK_BUSY)
    return 'the task is busy (locked); try again';
  // A creation limit (tasks retry): the message names the limit and its setting.
  if (err instanceof TaskError && err.code === TaskErrorCode.LIMIT_EXCEEDED) return err.message;
  return undefined;
}
