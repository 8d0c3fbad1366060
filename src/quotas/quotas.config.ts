import { ConfigSection } from '../config/config-section.js';
import { Env, IntEnv } from '../config/env.decorators.js';

@ConfigSection<QuotasConfig>({
  module: 'quotas',
  summary:
    'Rate limits and quotas. Counts are per instance unless noted; `0` turns a rate limit off (see ' +
    'limits-and-quotas).',
})
export class QuotasConfig {
  @Env('requests per second per principal on `/mcp`, per instance (token bucket refill); `0` turns it off')
  @IntEnv(0, 1000000)
  RATE_LIMIT_PRINCIPAL_RPS = 200;

  @Env('size of that bucket: requests a principal may make at once on top of the rate')
  @IntEnv(1, 10000000)
  RATE_LIMIT_PRINCIPAL_BURST = 2000;

  @Env('requests per second per client address, checked before authentication, per instance; `0` off')
  @IntEnv(0, 1000000)
  RATE_LIMIT_ADDRESS_RPS = 500;

  @Env('size of the per-address bucket')
  @IntEnv(1, 10000000)
  RATE_LIMIT_ADDRESS_BURST = 5000;

  @Env('live legacy sessions per principal (exact, all instances: counted in the database)')
  @IntEnv(1, 10000000)
  QUOTA_SESSIONS_PER_PRINCIPAL = 1000;

  @Env('open SSE streams per principal and instance (GET, `subscriptions/listen` and SSE answers together)')
  @IntEnv(1, 10000000)
  QUOTA_STREAMS_PER_PRINCIPAL = 500;

  @Env('POSTed requests in flight per principal and instance (a listen counts as a stream)')
  @IntEnv(1, 10000000)
  QUOTA_IN_FLIGHT_PER_PRINCIPAL = 500;

  @Env('blocked `tasks/result` calls per principal and instance')
  @IntEnv(1, 10000000)
  QUOTA_RESULT_WAITERS_PER_PRINCIPAL = 200;

  @Env('`resources/subscribe` entries per session')
  @IntEnv(1, 1000000)
  QUOTA_SUBSCRIPTIONS_PER_SESSION = 1000;

  @Env('largest request params (JSON bytes) stored with a task')
  @IntEnv(1024, 1073741824)
  QUOTA_TASK_PARAMS_BYTES = 1048576;

  @Env('largest task result (JSON bytes); a larger one fails the task with an error naming this quota')
  @IntEnv(1024, 1073741824)
  QUOTA_TASK_RESULT_BYTES = 4194304;

  @Env(
    'largest checkpoint (JSON bytes) a task run may save with `ctx.checkpoint`; a larger one is refused with ' +
      'an error naming this setting and both sizes, and the task keeps its previous checkpoint',
  )
  @IntEnv(256, 16777216)
  QUOTA_TASK_CHECKPOINT_BYTES = 65536;

  @Env('largest `inputResponses` (JSON bytes) of one `tasks/update`')
  @IntEnv(1024, 1073741824)
  QUOTA_TASK_INPUT_BYTES = 1048576;

  @Env('largest clientInfo + capabilities (JSON bytes) stored with a session')
  @IntEnv(256, 16777216)
  QUOTA_SESSION_CLIENT_BYTES = 65536;

  @Env(
    'JSON bytes of client answers (to elicitation, sampling, roots) one session may have parked in ' +
      '`mcp_client_response` at once: answers that arrived at another instance than the one waiting, kept ' +
      'until it takes them. Only answers to requests the session has outstanding are stored at all',
  )
  @IntEnv(1024, 1073741824)
  QUOTA_CLIENT_RESPONSE_BYTES_PER_SESSION = 4194304;

  @Env(
    'finished tasks one owner may keep (exact); new tasks are refused above it (the janitor frees them at expiry)',
  )
  @IntEnv(1, 100000000)
  QUOTA_RETAINED_TASKS_PER_OWNER = 10000;
}
