import { ConfigSection } from '../config/config-section.js';
import { IsIn } from 'class-validator';
import { Env, IntEnv } from '../config/env.decorators.js';

@ConfigSection<TasksConfig>({
  module: 'tasks',
  summary: 'The task registry: limits, ttl, leases, input rounds, commit groups, the finished-task cache.',
})
export class TasksConfig {
  @Env(
    'finished tasks an instance keeps in memory after a read or after committing their outcome, until their ' +
      'ttl runs out (a finished task never ' +
      'changes, and only the janitor deletes it, after ttl + `TASK_EXPIRED_GRACE_MS`); `0` reads every ' +
      '`tasks/get` from the database',
  )
  @IntEnv(0, 1000000)
  FINISHED_TASK_CACHE_MAX = 10000;

  @Env(
    'memory those finished tasks may take, in bytes (approximate JSON size); a task over 1/64 of it is not kept',
  )
  @IntEnv(0, 1073741824)
  FINISHED_TASK_CACHE_BYTES = 33554432;

  @Env('live (working or input_required) tasks one owner may hold; finished tasks do not count')
  @IntEnv(1, 1000000)
  TASK_MAX_PER_OWNER = 100;

  @Env('live tasks across all owners and instances')
  @IntEnv(1, 100000000)
  TASK_MAX_TOTAL = 10000;

  @Env('upper bound of a granted task ttl (retention from creation)')
  @IntEnv(1000, 2147483647)
  TASK_MAX_TTL_MS = 86400000;

  @Env('ttl granted when the client asks for none (clamped to `TASK_MAX_TTL_MS`)')
  @IntEnv(1000, 2147483647)
  TASK_DEFAULT_TTL_MS = 3600000;

  @Env('poll hint (`pollInterval` / `pollIntervalMs`) given to clients')
  @IntEnv(100, 3600000)
  TASK_POLL_INTERVAL_MS = 1000;

  @Env('longest a blocking `tasks/result` waits for a terminal state')
  @IntEnv(1000, 3600000)
  TASK_RESULT_TIMEOUT_MS = 300000;

  @Env('2026-07-28: how long an escalatable call runs inline before it becomes a task')
  @IntEnv(0, 60000)
  TASK_INLINE_WINDOW_MS = 100;

  @Env(
    'task work one instance runs at once (see operations.md, The queue): a task created while every slot is ' +
      'busy waits `working` and queued for any instance with a free slot. A run started by this instance, ' +
      'claimed from the queue or adopted when a 2026-07-28 call outlasts its inline window holds a slot until ' +
      'its work returns (outcome writes pending beyond this many hold one too); a call still inside its ' +
      'inline window holds none',
  )
  @IntEnv(1, 100000)
  TASK_WORKER_CONCURRENCY = 16;

  @Env(
    'safety poll of the task queue: claimers are woken by the bus (`mcp_task_queued`), a settled local run ' +
      'and bus reconnects; this only bounds how late a missed notification is noticed',
  )
  @IntEnv(100, 600000)
  TASK_CLAIM_POLL_MS = 2000;

  @Env(
    'lease of a running task, renewed by its instance every third of it; a lapsed lease fails the task ' +
      '(re-queues a resumable one with attempts left)',
  )
  @IntEnv(1000, 3600000)
  TASK_LEASE_MS = 30000;

  @Env(
    'most creations, or most worker outcomes, one instance commits in one transaction when they arrive while ' +
      'the previous group is committing (group commit; `1` turns it off). Each write still gets its own exact ' +
      'answer: a group that cannot commit as one runs each write alone (see architecture.md)',
  )
  @IntEnv(1, 1000)
  TASK_COMMIT_GROUP_MAX = 64;

  @Env(
    'who shares the task workers fairly when work waits: `principal` (each caller gets an equal share), ' +
      '`tenant` (callers with the same tenant, from `AUTH_TENANT_CLAIM` or `AUTH_PROXY_TENANT_HEADER`, share ' +
      'one; a caller without one is its own), or `off` (first come, first served)',
    { type: 'principal, tenant or off' },
  )
  @IsIn(['principal', 'tenant', 'off'], { message: 'TASK_FAIR_SHARE must be one of principal, tenant, off' })
  TASK_FAIR_SHARE: 'principal' | 'tenant' | 'off' = 'principal';

  @Env('`lock_timeout` of every task transaction, so a stuck lock surfaces as an error instead of a hang')
  @IntEnv(100, 60000)
  TASK_LOCK_TIMEOUT_MS = 5000;

  @Env("least time between two `statusMessage` writes from one task's progress (the latest message wins)")
  @IntEnv(0, 3600000)
  TASK_PROGRESS_WRITE_MS = 1000;

  @Env(
    'how long a worker retries a final write (complete, fail, input round) the database cannot take (lock ' +
      'timeout, reset connection, restart, failover), with backoff up to 2 s between attempts',
  )
  @IntEnv(0, 86400000)
  TASK_WRITE_RETRY_MS = 300000;

  @Env('a finished task stays readable this long after created + ttl, then the janitor deletes it')
  @IntEnv(0, 86400000)
  TASK_EXPIRED_GRACE_MS = 60000;

  @Env('tasks per `tasks/list` page')
  @IntEnv(1, 1000)
  TASK_LIST_PAGE_SIZE = 50;

  @Env('input_required rounds one task may go through; one more fails the task')
  @IntEnv(1, 1000)
  TASK_MAX_INPUT_ROUNDS = 10;

  @Env('input requests in one input_required round; more fails the task')
  @IntEnv(1, 1000)
  TASK_MAX_INPUT_KEYS = 50;

  @Env('largest saved handler state (JSON bytes) across an input_required round; larger fails the task')
  @IntEnv(0, 16777216)
  TASK_MAX_HANDLER_STATE_BYTES = 65536;
}
