// Console benchmark (issue 23): how fast the /admin pages answer on a deployment-sized database. Not run in CI.
//
//   npm run bench:console [-- <requests per page>]       (builds first; default 40 requests per page)
//   TEST_DATABASE_URL=postgres://user@127.0.0.1:5432/postgres node bench/console.mjs [N]
//
// A scratch database is seeded with set-based SQL (generate_series, a few statements, then ANALYZE):
//   task             CONSOLE_ROWS (default 1,000,000) rows, of which CONSOLE_LIVE (default 10,000) are live.
//                    Finished: created over the last 20 days up to a few minutes ago (ttl 21 days, so none is
//                    due for deletion), 88 % completed, 7 % failed, 5 % cancelled. Live: created over the last
//                    6 hours, 40 % working on an instance, 5 % queued, 55 % input_required. 2,000 owners and
//                    24 tools, both skewed (a few heavy callers and hot tools, a long tail), both eras; rows
//                    inserted in creation order, as a real table fills.
//   mcp_audit_event  about three rows per task (created, attempt, outcome or status; about 3.05M), then session
//                    and scope-refusal rows up to CONSOLE_AUDIT_ROWS (default 3,200,000), in time order; plus
//                    one live task with CONSOLE_TIMELINE (default 2,000) status changes and a checkpoint of
//                    about 200 kB: the "long timeline" page.
//   service_instance 6 running instances (their heartbeats kept fresh by this script, as live peers would) and
//                    30 stopped ones from earlier deploys; mcp_session 3,000 open and 30,000 ended sessions.
// The task usage counters are filled by the table's own statement triggers (the insert runs as a bulk
// transaction), so creation limits and quota pages see consistent counts.
//
// Then the built server starts on it (INSTANCE_ROLE=web, so the seeded queue is not claimed; the console on;
// proxy-header auth, the bench's caller in the admin group), and each console page and common filter is
// requested N times in a row (after 3 warm-up requests), one at a time. p50 and p99 of each; target < 300 ms.
// The table goes to stdout and to bench/results/console-<timestamp>.md.
//
// Env: CONSOLE_ROWS, CONSOLE_LIVE, CONSOLE_AUDIT_ROWS, CONSOLE_TIMELINE (above); CONSOLE_DATABASE_URL=<url> runs
// against a database seeded by an earlier run (not dropped; the server migrates it first), and
// CONSOLE_SEED_ONLY=true seeds, prints that URL and exits (for EXPLAIN sessions on the same data).
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { admin, pct, spawnServer, stopServer } from './bench-support.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const N = Math.max(5, Number(process.argv[2] ?? 40));
const ROWS = Number(process.env.CONSOLE_ROWS ?? 1_000_000);
const LIVE = Number(process.env.CONSOLE_LIVE ?? 10_000);
const AUDIT_ROWS = Number(process.env.CONSOLE_AUDIT_ROWS ?? 3_200_000);
const TIMELINE = Number(process.env.CONSOLE_TIMELINE ?? 2000);
const SEED_ONLY = process.env.CONSOLE_SEED_ONLY === 'true';
const REUSE = process.env.CONSOLE_DATABASE_URL;
const TARGET_MS = 300;

const OWNERS = 2000;
const TOOLS = [
  'search_documents', 'summarize', 'run_report', 'translate', 'fetch_url', 'query_warehouse', 'create_ticket',
  'send_email', 'transcribe', 'classify', 'extract_entities', 'generate_image', 'code_review', 'run_tests',
  'deploy_preview', 'export_csv', 'import_contacts', 'sync_calendar', 'lookup_customer', 'refund_order',
  'resize_video', 'backup_project', 'index_repository', 'audit_permissions',
];
const RUNNING = 6;
const STOPPED = 30;
const instanceId = (k) => `00000000-0000-4000-8000-${String(k).padStart(12, '0')}`;
const LONG_TASK = 'bench-long-timeline';
/** A task id as the server mints them (24 url-safe characters), derived from the SQL expression `of`. */
const taskId = (of) =>
  `translate(left(encode(decode(md5(${of}::text) || md5('x' || ${of}), 'hex'), 'base64'), 24), '+/', '-_')`;

const serverUrl = process.env.TEST_DATABASE_URL ?? process.env.DATABASE_URL;
if (!serverUrl && !REUSE) {
  console.error('Set TEST_DATABASE_URL (a PostgreSQL server on which a scratch database is created).');
  process.exit(2);
}

const PROXY_SECRET = randomBytes(16).toString('hex');
const ADMIN_GROUP = 'bench-console-admins';
const agent = new http.Agent({ keepAlive: true, maxSockets: 4 });
const adminHeaders = {
  'x-auth-proxy-secret': PROXY_SECRET,
  'x-forwarded-user': 'bench-operator',
  'x-forwarded-email': 'bench-operator@example.com',
  'x-forwarded-groups': ADMIN_GROUP,
};

// A task column list shared by the two task inserts below.
const TASK_COLUMNS = `id, owner_id, session_id, era, tool_name, status, status_message, created_at, last_updated_at,
  ttl_ms, expires_at, poll_interval_ms, request_params, result, error, input_requests, input_rounds, generation,
  instance_id, lease_expires_at, attempt, failed_attempts, max_attempts, resumable, checkpoint, last_error,
  available_at, idempotency_key, request_hash, trace_context`;

/** Fills an empty, migrated database; returns the seconds each step took. */
async function seed(url) {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  const took = {};
  const step = async (name, fn) => {
    const t = performance.now();
    await fn();
    took[name] = (performance.now() - t) / 1000;
    console.log(`seed: ${name} ${took[name].toFixed(1)} s`);
  };
  try {
    await c.query(`SET work_mem = '256MB'`);
    await c.query(`SET maintenance_work_mem = '512MB'`);
    await c.query('SELECT setseed(0.23)');
    const tools = `(ARRAY[${TOOLS.map((t) => `'${t}'`).join(',')}])`;
    await step('instances and sessions', async () => {
      await c.query(
        `INSERT INTO service_instance (id, hostname, pid, version, started_at, heartbeat_at, stopped_at)
         SELECT ('00000000-0000-4000-8000-' || lpad(k::text, 12, '0'))::uuid, 'mcp-' || k, 1000 + k, '0.1.0',
                now() - interval '3 days' - k * interval '1 day', now(),
                CASE WHEN k > $1 THEN now() - interval '3 days' - k * interval '1 day' + interval '20 hours' END
           FROM generate_series(1, $2::int) k`,
        [RUNNING, RUNNING + STOPPED],
      );
      // Open sessions seen in the last 10 minutes (the idle sweep leaves them), ended ones within the hour.
      await c.query(
        `INSERT INTO mcp_session (id, principal_id, protocol_version, client_capabilities, client_info, created_at,
                                  last_seen_at, ended_at)
         SELECT gen_random_uuid()::text, 'user-' || floor(${OWNERS} * random() ^ 3)::int, '2025-11-25', '{}',
                '{"name":"bench-client","version":"1.0.0"}', seen - random() * interval '2 hours', seen,
                CASE WHEN g > 3000 THEN seen + interval '1 second' END
           FROM (SELECT g, now() - CASE WHEN g > 3000 THEN random() * interval '50 minutes'
                                        ELSE random() * interval '10 minutes' END AS seen
                   FROM generate_series(1, 33000) g) s`,
      );
      await c.query(
        `INSERT INTO mcp_sse_stream (session_id, stream_id, last_seq)
         SELECT s.id, 'stream-' || k, 10 FROM mcp_session s, generate_series(1, 1 + abs(hashtext(s.id)) % 3) k
          WHERE s.ended_at IS NULL`,
      );
    });
    await c.query('BEGIN');
    // Bulk: the task usage counters are updated by the statement triggers over the inserted rows.
    await c.query(`SET LOCAL mcp.task_bulk = 'on'`);
    await step('finished tasks', () =>
      c.query(
        `INSERT INTO task (${TASK_COLUMNS})
         SELECT ${taskId('g')}, 'user-' || o, NULL, CASE WHEN r1 < 0.6 THEN 'modern' ELSE 'legacy' END, ${tools}[1 + tk],
                st, CASE st WHEN 'failed' THEN 'Tool failed' WHEN 'cancelled' THEN 'Cancelled' END,
                created, created + dur, 21 * 86400000, created + dur + interval '21 days', 1000,
                jsonb_build_object('name', ${tools}[1 + tk], 'arguments', jsonb_build_object('q', 'query ' || g)),
                CASE st WHEN 'completed' THEN jsonb_build_object('content',
                  jsonb_build_array(jsonb_build_object('type', 'text', 'text', repeat('r', 20 + (g % 400))))) END,
                CASE st WHEN 'failed' THEN '{"code":-32603,"message":"upstream timed out"}'::jsonb END,
                '{}', 0, 3, NULL, NULL, 1 + (g % 17 = 0)::int, (st = 'failed')::int + (g % 17 = 0)::int,
                CASE WHEN tk % 3 = 0 THEN 3 ELSE 1 END, tk % 3 = 0, NULL,
                CASE st WHEN 'failed' THEN '{"code":-32603,"message":"upstream timed out"}'::jsonb END,
                NULL, CASE WHEN g % 5 = 0 THEN 'idem-' || g END, CASE WHEN g % 5 = 0 THEN md5(g::text) END,
                jsonb_build_object('traceparent', '00-' || md5('t' || g) || '-' || left(md5('s' || g), 16) || '-01')
           FROM (SELECT g, floor(${OWNERS} * random() ^ 3)::int AS o, floor(${TOOLS.length} * random() ^ 2)::int AS tk,
                        random() AS r1,
                        CASE WHEN r2 < 0.88 THEN 'completed' WHEN r2 < 0.95 THEN 'failed' ELSE 'cancelled' END AS st,
                        now() - interval '2 minutes' - random() * interval '20 days' AS created,
                        random() * interval '90 seconds' AS dur
                   FROM (SELECT g, random() AS r2 FROM generate_series(1, $1::int) g) a) s
          ORDER BY created`,
        [ROWS - LIVE],
      ),
    );
    await step('live tasks', () =>
      c.query(
        `INSERT INTO task (${TASK_COLUMNS})
         SELECT ${taskId("'live' || g")}, 'user-' || o, NULL, era, ${tools}[1 + tk], st,
                CASE st WHEN 'input_required' THEN 'Waiting for input' END,
                created, created + random() * (now() - created), 86400000, created + interval '1 day', 1000,
                jsonb_build_object('name', ${tools}[1 + tk], 'arguments', jsonb_build_object('q', 'query ' || g)),
                NULL, NULL,
                CASE st WHEN 'input_required' THEN '{"r1.q":{"method":"elicitation/create","params":{}}}'::jsonb
                        ELSE '{}'::jsonb END,
                (st = 'input_required')::int, 2,
                inst, CASE WHEN inst IS NOT NULL THEN now() + interval '2 hours' END,
                1 + (g % 23 = 0)::int, (g % 23 = 0)::int, CASE WHEN tk % 3 = 0 THEN 3 ELSE 1 END, tk % 3 = 0,
                CASE WHEN tk % 3 = 0 THEN jsonb_build_object('step', g % 10, 'cursor', md5(g::text)) END, NULL,
                CASE WHEN st = 'working' AND inst IS NULL THEN created END, NULL, NULL,
                jsonb_build_object('traceparent', '00-' || md5('t' || g) || '-' || left(md5('s' || g), 16) || '-01')
           FROM (SELECT g, o, tk, st, created, CASE WHEN r1 < 0.6 THEN 'modern' ELSE 'legacy' END AS era,
                        -- Running work and legacy waits hold an instance's lease; queued work holds none.
                        CASE WHEN (st = 'working' AND r2 < 0.4) OR (st = 'input_required' AND r1 >= 0.6)
                             THEN ('00000000-0000-4000-8000-' || lpad((1 + g % ${RUNNING})::text, 12, '0'))::uuid
                        END AS inst
                   FROM (SELECT g, floor(${OWNERS} * random() ^ 3)::int AS o,
                                floor(${TOOLS.length} * random() ^ 2)::int AS tk, random() AS r1, r2,
                                CASE WHEN r2 < 0.45 THEN 'working' ELSE 'input_required' END AS st,
                                now() - random() ^ 2 * interval '6 hours' AS created
                           FROM (SELECT g, random() AS r2 FROM generate_series(1, $1::int) g) a) b) s
          ORDER BY created`,
        [LIVE],
      ),
    );
    await c.query('COMMIT');
    // About three audit rows per task (created, attempt, then the outcome or, for a task waiting for input, its
    // status change; a retry adds one), in time order. Actor, principal, instance and trace id as the writers
    // set them.
    await step('audit rows', () =>
      c.query(
        `INSERT INTO mcp_audit_event (at, kind, actor, principal, task_id, tool, era, status, previous_status,
                                      attempt, instance_id, trace_id, request_id, detail)
         SELECT at, kind, actor, principal, task_id, tool, era, status, prev, attempt, inst, trace, req, detail
           FROM (SELECT t.created_at + e.k * interval '5 milliseconds'
                          + CASE WHEN e.last THEN t.last_updated_at - t.created_at ELSE interval '0' END AS at,
                        e.kind, e.actor,
                        CASE WHEN e.actor = 'owner' THEN t.owner_id END AS principal, t.id AS task_id,
                        t.tool_name AS tool, t.era, e.status, e.prev, t.attempt,
                        coalesce(t.instance_id::text, '00000000-0000-4000-8000-' ||
                                 lpad((1 + abs(hashtext(t.id)) % ${RUNNING + STOPPED})::text, 12, '0')) AS inst,
                        substr(t.trace_context->>'traceparent', 4, 32) AS trace,
                        CASE WHEN e.actor = 'owner' THEN md5(t.id || e.k) END AS req, e.detail
                   FROM task t
                  CROSS JOIN LATERAL (VALUES
                    (0, 'task.created', 'owner', 'working', NULL, false,
                     jsonb_build_object('argumentBytes', 40, 'argumentSha256', md5(t.id))),
                    (1, 'task.attempt', 'worker', 'working', NULL, false, NULL),
                    (2, CASE t.status WHEN 'working' THEN NULL WHEN 'input_required' THEN 'task.status'
                                      ELSE 'task.' || t.status END,
                     CASE WHEN t.status = 'cancelled' THEN 'owner' ELSE 'worker' END, t.status, 'working', true,
                     CASE WHEN t.status = 'completed' THEN jsonb_build_object('resultBytes', 80, 'resultSha256', md5(t.id)) END),
                    (3, CASE WHEN t.failed_attempts > 0 THEN 'task.retry_scheduled' END, 'worker', 'working',
                     'working', false, NULL)
                  ) AS e(k, kind, actor, status, prev, last, detail)
                  WHERE e.kind IS NOT NULL) a
          ORDER BY at`,
      ),
    );
    // Session and scope-refusal events up to AUDIT_ROWS in all.
    await step('other audit rows', () =>
      c.query(
        `INSERT INTO mcp_audit_event (at, kind, actor, principal, session_id, era, detail)
         SELECT now() - random() * interval '30 days', CASE WHEN g % 10 = 0 THEN 'auth.scope_refused'
                                                              ELSE 'session.opened' END,
                'owner', 'user-' || floor(${OWNERS} * random() ^ 3)::int, 'old-session-' || g, 'legacy',
                CASE WHEN g % 10 = 0 THEN '{"missing":["tasks:write"]}'::jsonb END
           FROM generate_series(1, greatest(0, $1::int - (SELECT count(*) FROM mcp_audit_event)::int)) g`,
        [AUDIT_ROWS],
      ),
    );
    await step('long timeline', async () => {
      await c.query(
        `INSERT INTO task (id, owner_id, era, tool_name, status, status_message, created_at, last_updated_at, ttl_ms,
                           expires_at, poll_interval_ms, request_params, input_requests, input_rounds, instance_id,
                           lease_expires_at, attempt, failed_attempts, max_attempts, resumable, checkpoint)
         VALUES ($1, 'user-0', 'legacy', 'index_repository', 'input_required', 'Waiting for input',
                 now() - interval '5 hours', now(), 86400000, now() + interval '19 hours', 1000,
                 '{"name":"index_repository","arguments":{"repo":"big"}}',
                 '{"r1.q":{"method":"elicitation/create","params":{}}}', $2::int / 2, $3, now() + interval '2 hours',
                 4, 3, 5, true,
                 (SELECT jsonb_build_object('files', jsonb_agg(jsonb_build_object('path', 'src/file-' || g || '.ts',
                                                                                  'sha', md5(g::text))))
                    FROM generate_series(1, 3000) g))`,
        [LONG_TASK, TIMELINE, instanceId(1)],
      );
      await c.query(
        `INSERT INTO mcp_audit_event (at, kind, actor, principal, task_id, tool, era, status, previous_status,
                                      attempt, instance_id, detail)
         SELECT now() - interval '5 hours' + g * (interval '5 hours' / $2::int), 'task.status', 'worker', NULL, $1,
                'index_repository', 'legacy', CASE WHEN g % 2 = 0 THEN 'input_required' ELSE 'working' END,
                CASE WHEN g % 2 = 0 THEN 'working' ELSE 'input_required' END, 1 + g * 4 / $2::int, $3,
                jsonb_build_object('message', 'round ' || g)
           FROM generate_series(1, $2::int) g`,
        [LONG_TASK, TIMELINE, instanceId(1)],
      );
    });
    await step('analyze', () => c.query('VACUUM ANALYZE'));
    const counts = await c.query(
      `SELECT (SELECT count(*) FROM task) AS tasks,
              (SELECT count(*) FROM task WHERE status IN ('working', 'input_required')) AS live,
              (SELECT count(*) FROM mcp_audit_event) AS audit`,
    );
    return { took, counts: counts.rows[0] };
  } finally {
    await c.end();
  }
}

/** GET `path` with the admin's proxy headers; resolves { status, ms, body }. */
function get(base, path) {
  return new Promise((resolve, reject) => {
    const t = performance.now();
    http
      .get(`${base}${path}`, { agent, headers: adminHeaders }, (res) => {
        const chunks = [];
        res.on('data', (d) => chunks.push(d));
        res.on('end', () =>
          resolve({ status: res.statusCode, ms: performance.now() - t, body: Buffer.concat(chunks).toString() }),
        );
      })
      .on('error', reject);
  });
}

/** A link of the page whose href matches `re` (e.g. the keyset "next page"), HTML-decoded, or undefined. */
function link(body, re) {
  for (const m of body.matchAll(/href="([^"]+)"/g)) {
    const href = m[1].replace(/&amp;/g, '&').replace(/&#x3D;/g, '=');
    if (re.test(href)) return href;
  }
  return undefined;
}

/**
 * The pages measured, by name: each a path, or a function of the answers so far (the first answer of each
 * page, by name) giving one. `sample` holds ids read from the database: a failed task, an owner's session.
 */
function pages(sample) {
  const next = (name) => (bodies) => link(bodies[name], /[?&]after=/);
  return [
    ['tasks (all)', '/admin/tasks'],
    ['tasks: status working', '/admin/tasks?status=working'],
    ['tasks: status input_required', '/admin/tasks?status=input_required'],
    ['tasks: status completed', '/admin/tasks?status=completed'],
    ['tasks: status failed', '/admin/tasks?status=failed'],
    ['tasks: status cancelled', '/admin/tasks?status=cancelled'],
    ['tasks: a hot tool', `/admin/tasks?tool=${TOOLS[0]}`],
    ['tasks: a rare tool', `/admin/tasks?tool=${TOOLS[TOOLS.length - 1]}`],
    ['tasks: an unused tool', '/admin/tasks?tool=never_called'],
    ['tasks: a heavy owner', '/admin/tasks?owner=user-0'],
    ['tasks: a light owner', `/admin/tasks?owner=user-${OWNERS - 1}`],
    ['tasks: an instance', `/admin/tasks?instance=${instanceId(2)}`],
    ['tasks: created in the last hour', '/admin/tasks?newer=1h'],
    ['tasks: a day, a week ago', '/admin/tasks?newer=8d&older=7d'],
    ['tasks: failed, a hot tool', `/admin/tasks?status=failed&tool=${TOOLS[0]}`],
    ['tasks: cancelled, a rare tool', `/admin/tasks?status=cancelled&tool=${TOOLS[TOOLS.length - 1]}`],
    ['tasks: working, an owner', '/admin/tasks?status=working&owner=user-1'],
    ['tasks: page 2', next('tasks (all)')],
    ['tasks: page 2 of failed', next('tasks: status failed')],
    ['task counts (refresh)', '/admin/tasks/counts'],
    ['task: a failed one', `/admin/tasks/${sample.failedTask}`],
    ['task: long timeline', `/admin/tasks/${LONG_TASK}`],
    ['sessions', '/admin/sessions'],
    ['sessions: page 2', next('sessions')],
    ['sessions: an owner', '/admin/sessions?owner=user-0'],
    ['instances', '/admin/instances'],
    ['janitor', '/admin/janitor'],
    ['quotas', '/admin/quotas'],
  ];
}

async function measure(base, sample) {
  const rows = [];
  const firstBodies = {};
  for (const [name, target] of pages(sample)) {
    const path = typeof target === 'function' ? target(firstBodies) : target;
    if (!path) {
      rows.push({ name, path: '(no link found)', status: '-', ms: [] });
      continue;
    }
    let status;
    for (let i = 0; i < 3; i++) {
      const r = await get(base, path);
      status = r.status;
      firstBodies[name] ??= r.body;
      if (r.status >= 400) break;
    }
    const ms = [];
    if (status < 400) {
      for (let i = 0; i < N; i++) {
        const r = await get(base, path);
        if (r.status >= 400) throw new Error(`${path}: HTTP ${r.status} after a 2xx`);
        ms.push(r.ms);
      }
    }
    ms.sort((a, b) => a - b);
    rows.push({ name, path, status, ms });
    const f = (v) => (v === undefined ? '-' : `${v.toFixed(1)} ms`);
    console.log(`${name}: HTTP ${status} p50 ${f(pct(ms, 50))} p99 ${f(pct(ms, 99))}  ${path}`);
  }
  return rows;
}

async function main() {
  let dbUrl = REUSE;
  let drop = async () => undefined;
  if (!dbUrl) {
    const name = `bench_console_${randomBytes(4).toString('hex')}`;
    await admin(serverUrl, `CREATE DATABASE "${name}"`);
    const u = new URL(serverUrl);
    u.pathname = `/${name}`;
    dbUrl = u.toString();
    drop = () =>
      admin(serverUrl, `DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`).catch((err) =>
        console.error(`could not drop the scratch database ${name}: ${err.message}`),
      );
  }
  const env = {
    PORT: '0',
    DATABASE_URL: dbUrl,
    LOG_LEVEL: 'log',
    INSTANCE_ROLE: 'web',
    AUTH_PROVIDERS: 'proxy',
    AUTH_PROXY_SECRET: PROXY_SECRET,
    ADMIN_GROUPS: ADMIN_GROUP,
    ADMIN_CONSOLE: 'on',
    RATE_LIMIT_PRINCIPAL_RPS: '0',
    RATE_LIMIT_ADDRESS_RPS: '0',
  };
  const entry = join(ROOT, 'dist', 'src', 'main.js');
  let server;
  let heartbeats;
  let seeded;
  let rows;
  const keeper = new pg.Client({ connectionString: dbUrl });
  try {
    // The first start migrates the database; a fresh one is seeded after that, with the server stopped so its
    // janitor and claimer see the rows only once they are all in.
    server = await spawnServer([entry], env, { label: 'console', cwd: ROOT, timeoutMs: 120000 });
    if (!REUSE) {
      await stopServer(server);
      server = undefined;
      seeded = await seed(dbUrl);
      if (SEED_ONLY) {
        console.log(`seeded ${JSON.stringify(seeded.counts)}; database kept: ${dbUrl}`);
        drop = async () => undefined;
        return;
      }
      server = await spawnServer([entry], env, { label: 'console', cwd: ROOT, timeoutMs: 120000 });
    }
    // The seeded running instances stay alive: without heartbeats the janitor would rescue their tasks.
    await keeper.connect();
    const beat = () =>
      keeper.query(
        `UPDATE service_instance SET heartbeat_at = now() WHERE id = ANY($1::uuid[])`,
        [Array.from({ length: RUNNING }, (_, k) => instanceId(k + 1))],
      );
    await beat();
    heartbeats = setInterval(() => void beat().catch(() => undefined), 2000);
    const { rows: picked } = await keeper.query(
      `SELECT id FROM task WHERE status = 'failed' AND created_at < now() - interval '10 days'
        ORDER BY created_at DESC LIMIT 1`,
    );
    rows = await measure(server.base, { failedTask: picked[0]?.id ?? 'none' });
  } finally {
    clearInterval(heartbeats);
    await keeper.end().catch(() => undefined);
    if (server) await stopServer(server);
    await drop();
  }
  const f = (v) => (v === undefined ? '-' : v.toFixed(1));
  const over = rows.filter((r) => r.ms.length && pct(r.ms, 99) >= TARGET_MS).map((r) => r.name);
  const text = [
    `# bench/console.mjs ${new Date().toISOString()}`,
    '',
    `${os.cpus().length} × ${os.cpus()[0].model}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}. ` +
      (seeded
        ? `Seeded ${seeded.counts.tasks} task rows (${seeded.counts.live} live) and ${seeded.counts.audit} audit rows ` +
          `in ${Object.values(seeded.took).reduce((a, b) => a + b, 0).toFixed(0)} s`
        : `Database seeded by an earlier run`) +
      `; ${OWNERS} owners, ${TOOLS.length} tools, ${RUNNING} running instances. Each page ${N} times in a row after ` +
      `3 warm-up requests, one request at a time, full response read (loopback). Target: < ${TARGET_MS} ms.`,
    '',
    '| page | request | HTTP | p50 ms | p99 ms | max ms |',
    '|---|---|---|---|---|---|',
    ...rows.map(
      (r) =>
        `| ${r.name} | \`${r.path}\` | ${r.status} | ${f(pct(r.ms, 50))} | ${f(pct(r.ms, 99))} | ` +
        `${f(r.ms[r.ms.length - 1])} |`,
    ),
    '',
    over.length ? `Over the target at p99: ${over.join(', ')}.` : `Every page under ${TARGET_MS} ms at p99.`,
    '',
  ].join('\n');
  console.log(text);
  mkdirSync(join(ROOT, 'bench', 'results'), { recursive: true });
  const file = join(ROOT, 'bench', 'results', `console-${new Date().toISOString().replace(/[:.]/g, '-')}.md`);
  writeFileSync(file, text);
  console.log(`written to ${file}`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
