import { currentAuditContext } from '../audit/audit-context.js';
import { limitsText, QueueControl, QueueControlError } from '../tasks/sharing/queue-control.js';
import { allowOnly, boolFlag, CliUsageError, ExitCode, parseArgs, positional } from './cli-args.js';
import type { CliIo } from './admin-commands.js';
import type { CliServices } from './cli-context.js';
import { loadToolCatalog } from './cli-tool-catalog.js';

/**
 * `queue pause <tool>`, `queue resume <tool>`, `queue status [--json]`: a tool's queue, on every instance
 * (docs/operations.md, "The queue"). The tools are this deployment's, loaded from the same tool modules and
 * configuration as the server's; pausing one that does not exist, or that can never be a task, fails naming
 * it (exit 1).
 */
export async function runQueueCommand(args: string[], s: CliServices, io: CliIo): Promise<ExitCode> {
  const parsed = parseArgs(args, []);
  const sub = parsed.words[0];
  if (sub !== 'pause' && sub !== 'resume' && sub !== 'status') {
    throw new CliUsageError(sub ? `unknown queue command ${sub}` : 'queue needs a command');
  }
  const tools = await loadToolCatalog(s.config);
  const control = new QueueControl(s.toolQueue, s.audit, () => tools);
  if (sub === 'status') {
    allowOnly(parsed, ['json']);
    positional(parsed, []);
    const status = await control.status();
    if (boolFlag(parsed, 'json')) {
      io.out(JSON.stringify(status, null, 2));
      return ExitCode.OK;
    }
    io.out(
      [
        'tool',
        'paused',
        'running',
        'waiting',
        'paused_wait',
        'limit_wait',
        'claimable',
        'delayed',
        'lapsed',
        'limits',
      ].join('\t'),
    );
    for (const t of status.tools) {
      io.out(
        [
          t.tool + (t.unknown ? ' (not served)' : ''),
          t.paused ? 'yes' : 'no',
          t.running,
          t.waiting,
          t.waitingBy.paused,
          t.waitingBy.limit,
          t.waitingBy.claimable,
          t.waitingBy.delayed,
          t.waitingBy.lapsed,
          limitsText(t),
        ].join('\t'),
      );
    }
    io.out('');
    io.out(['fairness_key', 'running', 'waiting'].join('\t'));
    for (const k of status.fairnessKeys)
      io.out([k.key === '' ? '(shared)' : k.key, k.running, k.waiting].join('\t'));
    return ExitCode.OK;
  }
  allowOnly(parsed, ['json']);
  const [tool] = positional(parsed, ['TOOL']);
  const actor = currentAuditContext().actor.principal ?? 'cli';
  let change;
  try {
    change = sub === 'pause' ? await control.pause(tool, actor) : await control.resume(tool, actor);
  } catch (err) {
    if (!(err instanceof QueueControlError)) throw err;
    io.err(err.message);
    return ExitCode.FAILED;
  }
  const done = sub === 'pause' ? 'paused' : 'resumed';
  if (boolFlag(parsed, 'json')) io.out(JSON.stringify({ tool, [done]: true, ...change }));
  else if (!change.changed) io.out(`${tool} was already ${done}`);
  else if (sub === 'pause')
    io.out(`${tool} paused: ${change.tasks} queued task(s) held; running ones finish`);
  else io.out(`${tool} resumed: ${change.tasks} queued task(s) let go`);
  return change.changed ? ExitCode.OK : ExitCode.NOT_APPLIED;
}
