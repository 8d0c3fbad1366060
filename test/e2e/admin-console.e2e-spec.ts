import type { INestApplication } from '@nestjs/common';
import request from 'supertest';
import { CONSOLE_LIMITS } from '../../src/admin/admin-limits.js';
import { runCli } from '../../src/cli/cli.js';
import { metricValue } from '../support/controlled-executor.js';
import { runServer } from '../support/server-process.js';
import { LegacyClient, PROXY_SECRET, asUser, freshUser, waitFor } from '../support/tasks-e2e.js';
import { createTestApp, loopbackUrl } from '../support/test-app.js';
import { createTestDatabase, withClient, type TestDatabase } from '../support/test-database.js';

const ADMIN_GROUP = 'mcp-operators';
const ADMIN_SCOPE = 'mcp:admin';
/** An operator behind the SSO proxy, member of the admin group. */
const ADMIN = { ...asUser('ops-alice'), 'x-forwarded-groups': `eng, ${ADMIN_GROUP}` };
/** A principal the proxy authenticates that is no admin. */
const STRANGER = { ...asUser('mallory'), 'x-forwarded-groups': 'eng' };

/** Every console route, with what a request to it needs (task and session ids filled in by the test). */
function consoleRoutes(taskId: string, sessionId: string): [method: 'get' | 'post', path: string][] {
  return [
    ['get', '/admin'],
    ['get', '/admin/tasks'],
    ['get', '/admin/tasks/counts'],
    ['get', `/admin/tasks/${taskId}`],
    ['post', `/admin/tasks/${taskId}/cancel`],
    ['post', `/admin/tasks/${taskId}/redrive`],
    ['get', '/admin/sessions'],
    ['post', `/admin/sessions/${sessionId}/end`],
    ['get', '/admin/instances'],
    ['get', '/admin/janitor'],
    ['get', '/admin/quotas'],
    ['get', '/admin/queue'],
    ['post', '/admin/queue/slow_compute/pause'],
    ['post', '/admin/queue/slow_compute/resume'],
    ['get', '/admin/assets/console.css'],
    ['get', '/admin/assets/console.js'],
    ['get', '/admin/no-such-page'],
  ];
}

/** The submission id the page's redrive form carries (one per rendering of the page). */
function submissionOf(html: string): string {
  const m = /name="submission" value="([^"]+)"/.exec(html);
  if (!m) throw new Error('no submission field on the page');
  return m[1];
}

function csrfOf(html: string): string {
  const m = /name="_csrf" value="([^"]+)"/.exec(html);
  if (!m) throw new Error('no CSRF field on the page');
  return m[1];
}

/** An attribute value as the browser reads it (Handlebars escapes `&`, `=`, quotes). */
function htmlText(attr: string): string {
  return attr
    .replace(/&#x3D;/g, '=')
    .replace(/&amp;/g, '&')
    .replace(/&quot;/g, '"')
    .replace(/&#x27;/g, "'");
}

/** The task ids listed on a tasks page, in order. */
function listedTasks(html: string): string[] {
  return [...html.matchAll(/<a class="mono" href="\/admin\/tasks\/([^"?]+)">/g)].map((m) => m[1]);
}

describe('the /admin console over HTTP (real AppModule, SSO proxy and API keys)', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let mcpUrl: string;
  let host: string;
  const http = () => request(app.getHttpServer());

  const taskRow = (id: string) =>
    withClient(db.url, async (c) => {
      const r = await c.query<{ status: string; status_message: string; redriven_from: string | null }>(
        'SELECT status, status_message, redriven_from FROM task WHERE id = $1',
        [id],
      );
      return r.rows[0];
    });
  /** The audit rows of a task or a session, oldest first. */
  const auditOf = (column: 'task_id' | 'session_id', id: string) =>
    withClient(db.url, async (c) => {
      const r = await c.query(
        `SELECT kind, actor, principal, detail FROM mcp_audit_event WHERE ${column} = $1 ORDER BY id`,
        [id],
      );
      return r.rows;
    });

  /** A console POST as a browser on the console's own page sends it. */
  const post = (
    path: string,
    token: string,
    headers: Record<string, string> = ADMIN,
    fields: Record<string, string> = {},
  ) =>
    http()
      .post(path)
      .set(headers)
      .set('origin', `http://${host}`)
      .set('sec-fetch-site', 'same-origin')
      .type('form')
      .send({ _csrf: token, ...fields });

  beforeAll(async () => {
    db = await createTestDatabase('admin_console');
    app = await createTestApp(db.url, {
      AUTH_PROVIDERS: 'proxy,apikey',
      AUTH_PROXY_SECRET: PROXY_SECRET,
      ADMIN_GROUPS: ADMIN_GROUP,
      ADMIN_SCOPE,
      MCP_CONFORMANCE_FIXTURES: 'true',
    });
    mcpUrl = await loopbackUrl(app, '/mcp');
    host = new URL(mcpUrl).host;
  });
  afterAll(async () => {
    await app.close();
    await db.drop();
  });

  describe('the guard', () => {
    it('answers 401 with the /mcp challenge to an unauthenticated request, on every route', async () => {
      for (const [method, path] of consoleRoutes('t-unknown', 's-unknown')) {
        const res = await http()[method](path);
        expect([path, res.status]).toEqual([path, 401]);
        expect(res.headers['www-authenticate']).toMatch(/^Bearer resource_metadata="/);
        expect(res.headers['content-type']).toMatch(/^text\/html/);
        expect(res.headers['content-security-policy']).toContain("frame-ancestors 'none'");
      }
    });

    it('answers 403 to a principal that is no admin on every route, GET and POST, and audits it once a minute', async () => {
      const owner = freshUser('owner');
      const client = await LegacyClient.open(mcpUrl, {}, asUser(owner));
      const task = await client.createTask('slow_compute', { seconds: 30 });
      for (const [method, path] of consoleRoutes(task.taskId, client.sessionId)) {
        const req = http()[method](path).set(STRANGER);
        const res = method === 'post' ? await req.type('form').send({ _csrf: 'x' }) : await req;
        expect([path, res.status]).toEqual([path, 403]);
        expect(res.text).toContain('not a console admin');
        expect(res.headers['x-frame-options']).toBe('DENY');
      }
      // Nothing was changed by the refused POSTs.
      expect((await taskRow(task.taskId)).status).toBe('working');
      const live = await client.result('tasks/get', { taskId: task.taskId });
      expect(live.status).toBe('working');
      // Fourteen refusals, one audit row (the rest are coalesced into the next one).
      const rows = await waitFor(
        () =>
          withClient(db.url, (c) =>
            c.query<{ actor: string; principal: string; detail: { method: string; route: string } }>(
              `SELECT actor, principal, detail FROM mcp_audit_event WHERE kind = 'admin.refused'`,
            ),
          ),
        (r) => r.rows.length > 0,
        { what: 'the admin.refused audit row' },
      );
      expect(rows.rows).toEqual([
        {
          actor: 'owner',
          principal: expect.stringMatching(/^proxy:/),
          detail: { method: 'GET', route: '/admin' },
        },
      ]);
      await client.result('tasks/cancel', { taskId: task.taskId });
    });

    it('admits an API key created with ADMIN_SCOPE and refuses one without it', async () => {
      const keyWith = async (scopes: string): Promise<string> => {
        const out: string[] = [];
        const code = await runCli(
          ['apikey', 'create', '--name', `console-${scopes}`, '--scopes', scopes],
          { DATABASE_URL: db.url },
          { out: (l) => out.push(l), err: () => undefined },
        );
        expect(code).toBe(0);
        return (out.find((l) => l.startsWith('key: ')) ?? '').slice('key: '.length);
      };
      const admin = await keyWith(`tasks:read,${ADMIN_SCOPE}`);
      const plain = await keyWith('tasks:read');
      await http().get('/admin/tasks').set('authorization', `Bearer ${admin}`).expect(200);
      await http().get('/admin/tasks').set('authorization', `Bearer ${plain}`).expect(403);
    });

    it('refuses a POST without the form token, with another token, or from another site (CSRF)', async () => {
      const owner = freshUser('owner');
      const client = await LegacyClient.open(mcpUrl, {}, asUser(owner));
      const task = await client.createTask('slow_compute', { seconds: 30 });
      const page = await http().get(`/admin/tasks/${task.taskId}`).set(ADMIN).expect(200);
      const token = csrfOf(page.text);
      const path = `/admin/tasks/${task.taskId}/cancel`;
      // No token at all.
      const none = await http()
        .post(path)
        .set(ADMIN)
        .set('origin', `http://${host}`)
        .set('sec-fetch-site', 'same-origin')
        .type('form')
        .send({});
      expect(none.status).toBe(403);
      expect(none.text).toContain('CSRF check failed');
      // Another principal's token (admin too): tokens are bound to the principal.
      const other = { ...asUser('ops-bob'), 'x-forwarded-groups': ADMIN_GROUP };
      const bobs = csrfOf((await http().get(`/admin/tasks/${task.taskId}`).set(other).expect(200)).text);
      expect(bobs).not.toBe(token);
      expect((await post(path, bobs)).status).toBe(403);
      // The right token, sent by another site's page.
      const crossSite = await http()
        .post(path)
        .set(ADMIN)
        .set('origin', 'https://evil.example')
        .type('form')
        .send({ _csrf: token });
      expect(crossSite.status).toBe(403);
      expect(crossSite.text).toContain('Origin');
      const fetchMeta = await http()
        .post(path)
        .set(ADMIN)
        .set('sec-fetch-site', 'cross-site')
        .type('form')
        .send({ _csrf: token });
      expect(fetchMeta.status).toBe(403);
      expect((await taskRow(task.taskId)).status).toBe('working');
      // And then the real thing.
      const ok = await post(path, token);
      expect(ok.status).toBe(303);
      expect((await taskRow(task.taskId)).status).toBe('cancelled');
    });
  });

  describe('pages', () => {
    it('lists tasks across owners with filters, live counts and keyset pages', async () => {
      const owner = freshUser('many');
      const client = await LegacyClient.open(mcpUrl, {}, asUser(owner));
      const ids: string[] = [];
      // A page and two more rows: page size + 1 finished tasks, and the running one.
      for (let i = 0; i < CONSOLE_LIMITS.pageSize + 1; i++)
        ids.push((await client.createTask('slow_compute', { seconds: 0 })).taskId);
      const running = await client.createTask('slow_compute', { seconds: 30 });
      const other = await LegacyClient.open(mcpUrl, {}, asUser(freshUser('other')));
      const foreign = await other.createTask('slow_compute', { seconds: 30 });

      // Owner filter, newest first, a page at a time.
      const ownerId = (
        await withClient(db.url, (c) =>
          c.query<{ owner_id: string }>('SELECT owner_id FROM task WHERE id = $1', [running.taskId]),
        )
      ).rows[0].owner_id;
      const page1 = await http().get('/admin/tasks').query({ owner: ownerId }).set(ADMIN).expect(200);
      const listed1 = listedTasks(page1.text);
      expect(listed1).toHaveLength(CONSOLE_LIMITS.pageSize);
      expect(listed1[0]).toBe(running.taskId);
      expect(listed1).not.toContain(foreign.taskId);
      const next = /<a rel="next" href="([^"]+)"/.exec(page1.text)?.[1];
      expect(next).toBeDefined();
      const page2 = await http().get(htmlText(next!)).set(ADMIN).expect(200);
      const listed2 = listedTasks(page2.text);
      expect([...listed1, ...listed2].sort()).toEqual([...ids, running.taskId].sort());
      expect(page2.text).not.toContain('rel="next"');

      // Status filter across owners: both running tasks, none of the finished ones.
      const working = listedTasks(
        (
          await http()
            .get('/admin/tasks')
            .query({ status: 'working', tool: 'slow_compute' })
            .set(ADMIN)
            .expect(200)
        ).text,
      );
      expect(working).toEqual(expect.arrayContaining([running.taskId, foreign.taskId]));
      expect(working.some((id) => ids.includes(id))).toBe(false);
      // Age filter: nothing is older than a day.
      expect(listedTasks((await http().get('/admin/tasks?older=1d').set(ADMIN).expect(200)).text)).toEqual(
        [],
      );
      // Instance filter: the running ones are leased to this instance.
      const instance = (
        await withClient(db.url, (c) =>
          c.query<{ instance_id: string }>('SELECT instance_id FROM task WHERE id = $1', [running.taskId]),
        )
      ).rows[0].instance_id;
      expect(
        listedTasks((await http().get(`/admin/tasks?instance=${instance}&status=working`).set(ADMIN)).text),
      ).toEqual(expect.arrayContaining([running.taskId, foreign.taskId]));

      // Live counts: exact, from the same table.
      const counts = await http().get('/admin/tasks/counts').set(ADMIN).expect(200);
      const live = await withClient(db.url, (c) =>
        c.query<{ n: number }>(`SELECT count(*)::int AS n FROM task WHERE status = 'working'`),
      );
      expect(counts.body.counts).toEqual(
        expect.arrayContaining([{ status: 'working', count: live.rows[0].n, atLeast: false }]),
      );
      const shown = await http().get('/admin/tasks').set(ADMIN).expect(200);
      expect(shown.text).toContain(`<strong data-count="working">${live.rows[0].n}</strong>`);
      const finished = await withClient(db.url, (c) =>
        c.query<{ n: number }>(`SELECT count(*)::int AS n FROM task WHERE status = 'completed'`),
      );
      expect(shown.text).toContain(`<strong data-count="completed">${finished.rows[0].n}</strong>`);
      await client.result('tasks/cancel', { taskId: running.taskId });
      await other.result('tasks/cancel', { taskId: foreign.taskId });
    }, 60_000);

    it('answers a bad filter with a 400 page and an unknown task with a 404 page', async () => {
      for (const q of [
        'status=sleeping',
        'instance=not-a-uuid',
        'newer=soon',
        'after=garbage',
        'older=99y',
      ]) {
        const res = await http().get(`/admin/tasks?${q}`).set(ADMIN);
        expect([q, res.status]).toEqual([q, 400]);
        expect(res.headers['content-type']).toMatch(/^text\/html/);
      }
      const dup = await http().get('/admin/tasks?status=working&status=failed').set(ADMIN);
      expect(dup.status).toBe(400);
      expect((await http().get('/admin/tasks/no-such-task').set(ADMIN)).status).toBe(404);
      expect((await http().get('/admin/tasks/00000000000000000000000000').set(ADMIN)).status).toBe(404);
      expect((await http().get('/admin/nothing/here').set(ADMIN)).status).toBe(404);
      // A live session, so that the sessions page carries a form (and its token).
      await LegacyClient.open(mcpUrl, {}, asUser(freshUser('form')));
      const token = csrfOf((await http().get('/admin/sessions').set(ADMIN)).text);
      expect((await post('/admin/sessions/no-such-session/end', token)).status).toBe(404);
    });

    it("shows a task's page with its timeline escaped, then cancels it for its owner and redrives it", async () => {
      const owner = freshUser('owner');
      const client = await LegacyClient.open(mcpUrl, {}, asUser(owner));
      const task = await client.createTask('slow_compute', { seconds: 30, label: 'console' });
      const redrivenTasks = (id: string): Promise<number> =>
        withClient(db.url, async (c) =>
          Number((await c.query('SELECT count(*) AS n FROM task WHERE redriven_from = $1', [id])).rows[0].n),
        );
      const redrivenCount = (): Promise<number> =>
        metricValue(app, 'mcp_tasks_created_total', { tool: 'slow_compute', mode: 'redriven' });
      // An audit row whose detail carries markup: shown as text, never as HTML.
      await withClient(db.url, (c) =>
        c.query(
          `INSERT INTO mcp_audit_event (kind, actor, principal, task_id, tool, status, detail)
           VALUES ('task.status', 'system', 'test', $1, 'slow_compute', 'working', $2::jsonb)`,
          [task.taskId, JSON.stringify({ note: '<script>alert(1)</script>' })],
        ),
      );
      const page = await http().get(`/admin/tasks/${task.taskId}`).set(ADMIN).expect(200);
      expect(page.text).toContain('slow_compute');
      expect(page.text).toContain('Cancel task');
      expect(page.text).not.toContain('Redrive');
      expect(page.text).not.toContain('<script>alert(1)</script>');
      expect(page.text).toContain('&lt;script&gt;alert(1)&lt;/script&gt;');
      expect(page.text).toContain('task.status');

      const cancelled = await post(`/admin/tasks/${task.taskId}/cancel`, csrfOf(page.text));
      expect(cancelled.status).toBe(303);
      expect(cancelled.headers.location).toBe(`/admin/tasks/${task.taskId}?flash=cancelled`);
      // The owner's MCP client sees it.
      expect((await client.result('tasks/get', { taskId: task.taskId })).status).toBe('cancelled');
      expect(await taskRow(task.taskId)).toMatchObject({
        status: 'cancelled',
        status_message: 'Cancelled by an operator',
      });
      const after = await http().get(cancelled.headers.location).set(ADMIN).expect(200);
      expect(after.text).toContain('Task cancelled.');
      expect(after.text).toContain('Redrive');
      // A second cancel changes nothing and says so.
      const again = await post(`/admin/tasks/${task.taskId}/cancel`, csrfOf(after.text));
      expect(again.headers.location).toBe(`/admin/tasks/${task.taskId}?flash=already-finished`);

      const createdBefore = await redrivenCount();
      const form = { submission: submissionOf(after.text) };
      // A double submit of the form (two POSTs at once with the page's token and submission id) redrives
      // once: both land on the one new task.
      const [redriven, twice] = await Promise.all([
        post(`/admin/tasks/${task.taskId}/redrive`, csrfOf(after.text), ADMIN, form),
        post(`/admin/tasks/${task.taskId}/redrive`, csrfOf(after.text), ADMIN, form),
      ]);
      expect(redriven.status).toBe(303);
      expect(twice.status).toBe(303);
      expect(twice.headers.location).toBe(redriven.headers.location);
      expect(await redrivenTasks(task.taskId)).toBe(1);
      // The redrive is a task created on this server: counted as one, in the mode that says how it came.
      expect(await redrivenCount()).toBe(createdBefore + 1);
      // A form without its submission id is refused, and does nothing.
      const bare = await post(`/admin/tasks/${task.taskId}/redrive`, csrfOf(after.text));
      expect(bare.status).toBe(400);
      expect(await redrivenTasks(task.taskId)).toBe(1);
      const newId = /^\/admin\/tasks\/([^?]+)\?flash=redriven$/.exec(redriven.headers.location)?.[1];
      expect(newId).toBeDefined();
      expect(newId).not.toBe(task.taskId);
      expect(await taskRow(newId!)).toMatchObject({ redriven_from: task.taskId });
      // The redriven task belongs to the owner, who can cancel it.
      await waitFor(
        () => client.call('tasks/get', { taskId: newId }),
        (r) => r.result?.status === 'working',
        { what: 'the redriven task to run' },
      );
      const old = await http().get(`/admin/tasks/${task.taskId}`).set(ADMIN).expect(200);
      expect(old.text).toContain(`href="/admin/tasks/${newId}"`);
      const fresh = await http().get(`/admin/tasks/${newId}`).set(ADMIN).expect(200);
      expect(fresh.text).toContain(`href="/admin/tasks/${task.taskId}"`);
      // Both actions are in the audit trail under the operator who took them, from the console.
      // Principal ids are opaque: the operator's is a proxy principal other than the owner's (detail.owner).
      const created = (await auditOf('task_id', task.taskId)).find((r) => r.kind === 'task.created');
      const ownerId = created?.principal as string;
      const operator = expect.not.stringMatching(new RegExp(`^${ownerId}$`));
      const via = { via: 'console' };
      expect(await auditOf('task_id', task.taskId)).toEqual(
        expect.arrayContaining([
          {
            kind: 'task.cancelled',
            actor: 'operator',
            principal: operator,
            detail: expect.objectContaining(via),
          },
          {
            kind: 'task.redriven',
            actor: 'operator',
            principal: operator,
            detail: expect.objectContaining({ ...via, owner: ownerId, newTaskId: newId }),
          },
        ]),
      );
      // The old task's timeline on its page shows them.
      expect(old.text).toContain('task.cancelled');
      expect(old.text).toContain('task.redriven');
      await client.result('tasks/cancel', { taskId: newId });
    }, 30_000);

    it("shows a finished task's result size, its trace id and a saved checkpoint, cut to the preview", async () => {
      const client = await LegacyClient.open(mcpUrl, {}, asUser(freshUser('owner')));
      const task = await client.createTask('slow_compute', { seconds: 0, label: 'sized' });
      await waitFor(
        () => taskRow(task.taskId),
        (r) => r?.status === 'completed',
        { what: 'the task to complete' },
      );
      const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
      const checkpoint = { rows: Array.from({ length: 400 }, (_, i) => ({ i, note: `step <${i}>` })) };
      const sizes = await withClient(db.url, async (c) => {
        await c.query(`UPDATE task SET checkpoint = $2::jsonb, trace_context = $3::jsonb WHERE id = $1`, [
          task.taskId,
          JSON.stringify(checkpoint),
          JSON.stringify({ traceparent: `00-${traceId}-00f067aa0ba902b7-01` }),
        ]);
        const r = await c.query<{ result: number; checkpoint: number }>(
          `SELECT octet_length(result::text) AS result, octet_length(checkpoint::text) AS checkpoint
             FROM task WHERE id = $1`,
          [task.taskId],
        );
        return r.rows[0];
      });
      const page = await http().get(`/admin/tasks/${task.taskId}`).set(ADMIN).expect(200);
      expect(page.text).toContain(`<dt>Result</dt><dd>${sizes.result} B</dd>`);
      expect(page.text).toContain(`<dt>Trace id</dt><dd class="mono">${traceId}</dd>`);
      expect(page.text).toContain(
        `${(sizes.checkpoint / 1024).toFixed(1)} KiB (first 4000 characters shown)`,
      );
      const pre = /<pre class="json">([\s\S]*?)<\/pre>/.exec(page.text)?.[1] ?? '';
      expect(htmlText(pre.replace(/&lt;/g, '<').replace(/&gt;/g, '>'))).toHaveLength(4000);
      expect(pre).toContain('step &lt;0&gt;');
      expect(pre).not.toContain('step &lt;399&gt;');
      expect(page.text).toContain('Redrive');
      expect(page.text).not.toContain('Cancel task');
    });

    it('lists live sessions and ends one: its next request is refused', async () => {
      const owner = freshUser('sess');
      const client = await LegacyClient.open(mcpUrl, {}, asUser(owner));
      const page = await http().get('/admin/sessions').set(ADMIN).expect(200);
      expect(page.text).toContain(client.sessionId);
      const ended = await post(
        `/admin/sessions/${encodeURIComponent(client.sessionId)}/end`,
        csrfOf(page.text),
      );
      expect(ended.status).toBe(303);
      expect(ended.headers.location).toBe('/admin/sessions?flash=ended');
      expect((await client.send('ping')).status).toBe(404);
      const after = await http().get('/admin/sessions?flash=ended').set(ADMIN).expect(200);
      expect(after.text).toContain('Session ended');
      expect(after.text).not.toContain(client.sessionId);
      expect(await auditOf('session_id', client.sessionId)).toEqual([
        expect.objectContaining({ kind: 'session.opened', actor: 'owner' }),
        {
          kind: 'session.ended',
          actor: 'operator',
          principal: expect.stringMatching(/^proxy:/),
          detail: expect.objectContaining({ reason: 'operator', via: 'console' }),
        },
      ]);
    });

    it('shows the instances, the janitor and the quotas', async () => {
      // Another instance's row (a worker stopped a minute ago): its role comes from its row, not this process.
      await withClient(db.url, (c) =>
        c.query(
          `INSERT INTO service_instance (id, hostname, pid, version, role, started_at, heartbeat_at, stopped_at)
           VALUES (gen_random_uuid(), 'worker-host', 4242, '0.0.1', 'worker', now() - interval '1 hour',
                   now() - interval '1 minute', now() - interval '1 minute')`,
        ),
      );
      const instances = await http().get('/admin/instances').set(ADMIN).expect(200);
      expect(instances.text).toMatch(/<td>worker<\/td>\s*<td>worker-host<\/td>/);
      const self = await withClient(db.url, (c) =>
        c.query<{ id: string }>('SELECT id FROM service_instance WHERE stopped_at IS NULL'),
      );
      expect(self.rows).toHaveLength(1);
      expect(instances.text).toContain(`${self.rows[0].id} (this one)`);
      expect(instances.text).toContain('role <strong>all</strong>');
      const janitor = await http().get('/admin/janitor').set(ADMIN).expect(200);
      expect(janitor.text).toContain('Backlog');
      expect(janitor.text).toContain('runs ok');
      const quotas = await http().get('/admin/quotas').set(ADMIN).expect(200);
      expect(quotas.text).toContain('RATE_LIMIT_ADDRESS_RPS');
      expect(quotas.text).toContain('QUOTA_RETAINED_TASKS_PER_OWNER');
    });

    it("pauses and resumes a tool's queue, audited as the operator, CSRF-checked, refusing tools without a queue", async () => {
      const paused = () =>
        withClient(db.url, async (c) => {
          const r = await c.query<{ paused: boolean }>(
            `SELECT paused FROM tool_queue WHERE tool_name = 'limited_job'`,
          );
          return r.rows[0]?.paused ?? false;
        });
      const page = await http().get('/admin/queue').set(ADMIN).expect(200);
      expect(page.text).toContain('aria-current="page">Queue');
      expect(page.text).toMatch(/<tr data-tool="limited_job">[\s\S]*?0\/2 at once, 1 per key/);
      expect(page.text).toContain('By fairness key');
      // No token, then a made-up one: refused before anything changes.
      await http()
        .post('/admin/queue/limited_job/pause')
        .set(ADMIN)
        .set('origin', `http://${host}`)
        .type('form')
        .send({})
        .expect(403);
      expect((await post('/admin/queue/limited_job/pause', 'forged-token')).status).toBe(403);
      expect(await paused()).toBe(false);

      const done = await post('/admin/queue/limited_job/pause', csrfOf(page.text));
      expect(done.status).toBe(303);
      expect(done.headers.location).toBe('/admin/queue?flash=paused');
      expect(await paused()).toBe(true);
      const after = await http().get('/admin/queue?flash=paused').set(ADMIN).expect(200);
      expect(after.text).toContain('Paused on every instance');
      expect(after.text).toMatch(
        /<tr data-tool="limited_job" class="hit">[\s\S]*?<td class="paused">yes<\/td>/,
      );
      expect(after.text).toContain('action="/admin/queue/limited_job/resume"');
      const again = await post('/admin/queue/limited_job/pause', csrfOf(after.text));
      expect(again.headers.location).toBe('/admin/queue?flash=already-paused');
      const resumed = await post('/admin/queue/limited_job/resume', csrfOf(after.text));
      expect(resumed.headers.location).toBe('/admin/queue?flash=resumed');
      expect(await paused()).toBe(false);

      const audit = await withClient(db.url, (c) =>
        c.query(
          `SELECT kind, actor, principal, tool, detail FROM mcp_audit_event
            WHERE kind LIKE 'queue.%' ORDER BY id`,
        ),
      );
      expect(audit.rows).toEqual([
        {
          kind: 'queue.paused',
          actor: 'operator',
          principal: expect.stringMatching(/^proxy:/),
          tool: 'limited_job',
          detail: expect.objectContaining({ via: 'console', tasks: 0 }),
        },
        {
          kind: 'queue.resumed',
          actor: 'operator',
          principal: expect.stringMatching(/^proxy:/),
          tool: 'limited_job',
          detail: expect.objectContaining({ via: 'console', tasks: 0 }),
        },
      ]);

      const token = csrfOf(after.text);
      const unknown = await post('/admin/queue/no_such_tool/pause', token);
      expect(unknown.status).toBe(404);
      expect(unknown.text).toContain('no_such_tool');
      const never = await post('/admin/queue/test_simple_text/pause', token);
      expect(never.status).toBe(409);
      expect(never.text).toContain('test_simple_text');
      const odd = await post(`/admin/queue/${'x'.repeat(200)}/pause`, token);
      expect(odd.status).toBe(404);
      expect(await paused()).toBe(false);
    });

    it('offers Resume, and no Pause, for a paused tool this deployment no longer serves', async () => {
      // A tool paused before a deploy that removed it: its row stays, and so must a way to lift the pause.
      await withClient(db.url, (c) =>
        c.query(
          `INSERT INTO tool_queue (tool_name, paused, changed_at, changed_by) VALUES ('retired_tool', true, now(), 'cli')`,
        ),
      );
      const page = await http().get('/admin/queue').set(ADMIN).expect(200);
      expect(page.text).toMatch(/<tr data-tool="retired_tool" class="hit">[\s\S]*?\(not served here\)/);
      expect(page.text).toContain('action="/admin/queue/retired_tool/resume"');
      expect(page.text).not.toContain('action="/admin/queue/retired_tool/pause"');
      const resumed = await post('/admin/queue/retired_tool/resume', csrfOf(page.text));
      expect(resumed.headers.location).toBe('/admin/queue?flash=resumed');
      const after = await http().get('/admin/queue').set(ADMIN).expect(200);
      expect(after.text).not.toContain('retired_tool');
      // Pausing it again is refused: there is no such tool here.
      expect((await post('/admin/queue/retired_tool/pause', csrfOf(after.text))).status).toBe(404);
    });

    it('serves its own stylesheet and script with a CSP that allows nothing inline', async () => {
      const css = await http().get('/admin/assets/console.css').set(ADMIN).expect(200);
      expect(css.headers['content-type']).toMatch(/^text\/css/);
      const js = await http().get('/admin/assets/console.js').set(ADMIN).expect(200);
      expect(js.headers['content-type']).toMatch(/^text\/javascript/);
      const page = await http().get('/admin/tasks').set(ADMIN).expect(200);
      const csp = page.headers['content-security-policy'];
      expect(csp).toContain("script-src 'self'");
      expect(csp).not.toContain('unsafe-inline');
      expect(page.text).not.toMatch(/<script>|<style|style="|onclick=/);
      expect(page.headers['cache-control']).toBe('no-store');
      await http().get('/admin').set(ADMIN).expect(302).expect('location', '/admin/tasks');
    });
  });
});

describe('the console switch', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase('admin_console_off');
  });
  afterAll(async () => {
    await db.drop();
  });

  it('serves no /admin route without an admin credential (auto)', async () => {
    const app = await createTestApp(db.url, { AUTH_PROVIDERS: 'proxy', AUTH_PROXY_SECRET: PROXY_SECRET });
    try {
      await request(app.getHttpServer()).get('/admin/tasks').set(ADMIN).expect(404);
    } finally {
      await app.close();
    }
  });

  it('refuses to boot in production with ADMIN_CONSOLE=on and no admin credential', async () => {
    const run = runServer({
      NODE_ENV: 'production',
      HOST: '127.0.0.1',
      DATABASE_URL: db.url,
      AUTH_PROVIDERS: 'proxy',
      AUTH_PROXY_SECRET: PROXY_SECRET,
      MCP_RESOURCE_URL: 'https://mcp.example.com/mcp',
      METRICS_TOKEN: 'scrape-token-0123456789',
      ADMIN_CONSOLE: 'on',
    });
    expect(await run.exited).toBe(1);
    expect(run.output()).toMatch(/ADMIN_CONSOLE=on needs an admin credential when NODE_ENV=production/);
    expect(run.output()).not.toMatch(/listening on/);
  });
});
