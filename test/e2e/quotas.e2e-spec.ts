import type { INestApplication } from '@nestjs/common';
import { principalIdFor } from '../../src/principals/principals.service.js';
import { QuotaService } from '../../src/quotas/quota.service.js';
import { metricValue } from '../support/controlled-executor.js';
import { LEGACY, openStream, responseOf, rpc, type RpcAnswer } from '../support/mcp-http.js';
import {
  asUser,
  freshUser,
  LegacyClient,
  listenInit,
  modern,
  PROXY_SECRET,
  waitFor,
} from '../support/tasks-e2e.js';
import { createTestApp, loopbackUrl } from '../support/test-app.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';

const PROXY = { AUTH_PROVIDERS: 'proxy', AUTH_PROXY_SECRET: PROXY_SECRET, MCP_CONFORMANCE_FIXTURES: 'true' };

const idOf = (user: string) => principalIdFor({ provider: 'proxy', subject: user });
const rejections = (app: INestApplication, quota: string) =>
  metricValue(app, 'mcp_quota_rejections_total', { quota });
const errorOf = (answer: RpcAnswer) => responseOf(answer)?.error;

/** The precise refusal: JSON-RPC -32000 naming the quota, its limit and the setting that raises it. */
function expectQuotaError(answer: RpcAnswer, quota: string, limit: number, setting: string): void {
  expect(errorOf(answer)).toEqual({
    code: -32000,
    message: expect.any(String),
    data: expect.objectContaining({ quota, limit, setting }),
  });
}

describe('per-principal quotas (over real HTTP)', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let url: string;

  beforeAll(async () => {
    db = await createTestDatabase('quotas');
    app = await createTestApp(db.url, {
      ...PROXY,
      QUOTA_SESSIONS_PER_PRINCIPAL: '2',
      QUOTA_STREAMS_PER_PRINCIPAL: '2',
      QUOTA_IN_FLIGHT_PER_PRINCIPAL: '3',
      QUOTA_RESULT_WAITERS_PER_PRINCIPAL: '1',
      QUOTA_SUBSCRIPTIONS_PER_SESSION: '2',
      QUOTA_TASK_PARAMS_BYTES: '2048',
      QUOTA_TASK_RESULT_BYTES: '1024',
      QUOTA_TASK_INPUT_BYTES: '1024',
      QUOTA_SESSION_CLIENT_BYTES: '512',
      QUOTA_RETAINED_TASKS_PER_OWNER: '2',
    });
    url = await loopbackUrl(app, '/mcp');
  });

  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  const initialize = (user: string, clientInfo: Record<string, unknown> = { name: 'q', version: '1' }) =>
    rpc(
      url,
      {
        jsonrpc: '2.0',
        id: 0,
        method: 'initialize',
        params: { protocolVersion: LEGACY, capabilities: {}, clientInfo },
      },
      asUser(user),
    );

  it('live sessions: the third initialize is refused (429), the first two keep working, DELETE frees one', async () => {
    const user = freshUser();
    const a = await LegacyClient.open(url, {}, asUser(user));
    const b = await LegacyClient.open(url, {}, asUser(user));
    const before = await rejections(app, 'sessions');
    const third = await initialize(user);
    expect(third.status).toBe(429);
    expectQuotaError(third, 'sessions', 2, 'QUOTA_SESSIONS_PER_PRINCIPAL');
    expect(await rejections(app, 'sessions')).toBe(before + 1);
    expect(await a.result('ping')).toEqual({});
    expect(await b.result('ping')).toEqual({});
    // Another principal is not affected.
    expect((await initialize(freshUser())).status).toBe(200);
    const ended = await rpc(url, undefined, a.headers(), 'DELETE');
    expect(ended.status).toBe(200);
    expect((await initialize(user)).status).toBe(200);
  });

  it('client info and capabilities of a session are bounded (413 naming the quota)', async () => {
    const before = await rejections(app, 'session_client_bytes');
    const answer = await initialize(freshUser(), { name: 'x'.repeat(600), version: '1' });
    expect(answer.status).toBe(413);
    expectQuotaError(answer, 'session_client_bytes', 512, 'QUOTA_SESSION_CLIENT_BYTES');
    expect(await rejections(app, 'session_client_bytes')).toBe(before + 1);
  });

  it('open streams: GET + listen fill the quota, a third stream is a 429, closing one frees it', async () => {
    const user = freshUser();
    const quotas = app.get(QuotaService);
    const session = await LegacyClient.open(url, {}, asUser(user));
    const get = await session.openGetStream();
    expect(get.status).toBe(200);
    const listen = await openStream(url, listenInit(user, { toolsListChanged: true }));
    expect(listen.status).toBe(200);
    expect((await listen.next()).json.method).toBe('notifications/subscriptions/acknowledged');
    expect(quotas.holding('streams', idOf(user))).toBe(2);

    const before = await rejections(app, 'streams');
    const third = await fetch(url, listenInit(user, { toolsListChanged: true }));
    expect(third.status).toBe(429);
    expect(third.headers.get('retry-after')).toBe('1');
    const body = (await third.json()) as any;
    expect(body.error.data).toMatchObject({
      quota: 'streams',
      limit: 2,
      setting: 'QUOTA_STREAMS_PER_PRINCIPAL',
    });
    expect(await rejections(app, 'streams')).toBe(before + 1);
    // What was accepted keeps working: the session still answers with its GET stream open.
    expect(await session.result('ping')).toEqual({});

    listen.close();
    await waitFor(
      async () => quotas.holding('streams', idOf(user)),
      (n) => n === 1,
      { what: 'stream released' },
    );
    const again = await openStream(url, listenInit(user, { toolsListChanged: true }));
    expect(again.status).toBe(200);
    again.close();
    get.close();
    await waitFor(
      async () => quotas.holding('streams', idOf(user)),
      (n) => n === 0,
      { what: 'all streams released' },
    );
  });

  it('requests in flight: a fourth concurrent request is a 429; the three accepted ones complete', async () => {
    const user = freshUser();
    const quotas = app.get(QuotaService);
    const c = await LegacyClient.open(url, {}, asUser(user));
    const running = [1, 2, 3].map((i) =>
      c.call('tools/call', { name: 'slow_compute', arguments: { seconds: 1, label: `job${i}` } }),
    );
    await waitFor(
      async () => quotas.holding('in_flight', idOf(user)),
      (n) => n === 3,
      { what: 'three requests in flight' },
    );
    const before = await rejections(app, 'in_flight');
    const fourth = await c.send('ping');
    expect(fourth.status).toBe(429);
    expect(fourth.headers.get('retry-after')).toBe('1');
    expectQuotaError(fourth, 'in_flight', 3, 'QUOTA_IN_FLIGHT_PER_PRINCIPAL');
    expect(await rejections(app, 'in_flight')).toBe(before + 1);
    // Notifications and responses are not counted in flight: a client's answer must always get through
    // (one that answers nothing is refused as such, 400, not as a quota).
    const note = await rpc(url, { jsonrpc: '2.0', method: 'notifications/roots/list_changed' }, c.headers());
    expect(note.status).toBe(202);
    const answer = await rpc(url, { jsonrpc: '2.0', id: 'srv-unknown', result: {} }, c.headers());
    expect(answer.status).toBe(400);
    expect(errorOf(answer).code).toBe(-32600);
    const done = await Promise.all(running);
    done.forEach((r, i) => expect(r.result.content[0].text).toBe(`Computed job${i + 1} after 1 s`));
    await waitFor(
      async () => quotas.holding('in_flight', idOf(user)),
      (n) => n === 0,
      { what: 'in-flight released' },
    );
    expect(await c.result('ping')).toEqual({});
  });

  it('blocked tasks/result: a second waiter is refused; the first still gets the result', async () => {
    const user = freshUser();
    const quotas = app.get(QuotaService);
    const c = await LegacyClient.open(url, {}, asUser(user));
    const task = await c.createTask('slow_compute', { seconds: 1, label: 'waited' });
    const first = c.call('tasks/result', { taskId: task.taskId });
    await waitFor(
      async () => quotas.holding('result_waiters', idOf(user)),
      (n) => n === 1,
      { what: 'one waiter' },
    );
    const before = await rejections(app, 'result_waiters');
    const second = await c.send('tasks/result', { taskId: task.taskId });
    expect(second.status).toBe(429);
    expectQuotaError(second, 'result_waiters', 1, 'QUOTA_RESULT_WAITERS_PER_PRINCIPAL');
    expect(await rejections(app, 'result_waiters')).toBe(before + 1);
    const result = await first;
    expect(result.result.content[0].text).toBe('Computed waited after 1 s');
    expect(quotas.holding('result_waiters', idOf(user))).toBe(0);
  });

  it('resources/subscribe entries per session are bounded; a held one can be renewed, unsubscribing frees one', async () => {
    const c = await LegacyClient.open(url, {}, asUser(freshUser()));
    expect(await c.result('resources/subscribe', { uri: 'test://a' })).toEqual({});
    expect(await c.result('resources/subscribe', { uri: 'test://b' })).toEqual({});
    const before = await rejections(app, 'subscriptions');
    const third = await c.send('resources/subscribe', { uri: 'test://c' });
    expectQuotaError(third, 'subscriptions', 2, 'QUOTA_SUBSCRIPTIONS_PER_SESSION');
    expect(await rejections(app, 'subscriptions')).toBe(before + 1);
    expect(await c.result('resources/subscribe', { uri: 'test://a' })).toEqual({});
    expect(await c.result('resources/unsubscribe', { uri: 'test://a' })).toEqual({});
    expect(await c.result('resources/subscribe', { uri: 'test://c' })).toEqual({});
    // Each entry is stored in the session row: a URI is bounded in length, so the row is bounded too.
    expect(await c.result('resources/unsubscribe', { uri: 'test://c' })).toEqual({});
    const long = await c.send('resources/subscribe', { uri: `test://${'x'.repeat(2048)}` });
    expect(errorOf(long)).toEqual({
      code: -32602,
      message: 'params.uri must be a string of 1 to 2048 characters',
    });
  });

  it('request params stored with a task are bounded (both eras)', async () => {
    const user = freshUser();
    const c = await LegacyClient.open(url, {}, asUser(user));
    const before = await rejections(app, 'task_params_bytes');
    const legacy = await c.send('tools/call', {
      name: 'slow_compute',
      arguments: { seconds: 0, label: 'x'.repeat(3000) },
      task: {},
    });
    expectQuotaError(legacy, 'task_params_bytes', 2048, 'QUOTA_TASK_PARAMS_BYTES');
    const modernAnswer = await modern(
      url,
      'tools/call',
      { name: 'slow_compute', arguments: { seconds: 0, label: 'x'.repeat(3000) } },
      { headers: asUser(user) },
    );
    expectQuotaError(modernAnswer, 'task_params_bytes', 2048, 'QUOTA_TASK_PARAMS_BYTES');
    expect(await rejections(app, 'task_params_bytes')).toBe(before + 2);
    const small = await c.createTask('slow_compute', { seconds: 0 });
    expect(small.status).toBe('working');
  });

  it('a task result larger than the quota fails the task with an error naming it', async () => {
    const c = await LegacyClient.open(url, {}, asUser(freshUser()));
    const before = await rejections(app, 'task_result_bytes');
    const task = await c.createTask('slow_compute', { seconds: 0, label: 'y'.repeat(1500) });
    const result = await c.call('tasks/result', { taskId: task.taskId });
    expect(result.error).toEqual({
      code: -32000,
      message: 'The result exceeds QUOTA_TASK_RESULT_BYTES = 1024',
      data: { quota: 'task_result_bytes', limit: 1024, setting: 'QUOTA_TASK_RESULT_BYTES' },
    });
    expect((await c.result('tasks/get', { taskId: task.taskId })).status).toBe('failed');
    expect(await rejections(app, 'task_result_bytes')).toBe(before + 1);
  });

  it('inputResponses of one tasks/update are bounded', async () => {
    const before = await rejections(app, 'task_input_bytes');
    const answer = await modern(
      url,
      'tasks/update',
      { taskId: 'AAAAAAAAAAAAAAAAAAAAAAAA', inputResponses: { big: 'z'.repeat(2000) } },
      { headers: asUser(freshUser()) },
    );
    expectQuotaError(answer, 'task_input_bytes', 1024, 'QUOTA_TASK_INPUT_BYTES');
    expect(await rejections(app, 'task_input_bytes')).toBe(before + 1);
  });

  it('finished tasks kept per owner are bounded; the kept ones stay readable', async () => {
    const c = await LegacyClient.open(url, {}, asUser(freshUser()));
    const kept: string[] = [];
    for (let i = 0; i < 2; i++) {
      const t = await c.createTask('slow_compute', { seconds: 0 });
      await waitFor(
        () => c.result('tasks/get', { taskId: t.taskId }),
        (x) => x.status === 'completed',
      );
      kept.push(t.taskId);
    }
    const before = await rejections(app, 'retained_tasks');
    const third = await c.send('tools/call', { name: 'slow_compute', arguments: { seconds: 0 }, task: {} });
    expectQuotaError(third, 'retained_tasks', 2, 'QUOTA_RETAINED_TASKS_PER_OWNER');
    expect(await rejections(app, 'retained_tasks')).toBe(before + 1);
    for (const id of kept) expect((await c.result('tasks/get', { taskId: id })).status).toBe('completed');
  });
});

describe('request rates (token buckets over real HTTP)', () => {
  let db: TestDatabase;
  let principalApp: INestApplication;
  let addressApp: INestApplication;

  beforeAll(async () => {
    db = await createTestDatabase('rates');
    principalApp = await createTestApp(db.url, {
      ...PROXY,
      RATE_LIMIT_PRINCIPAL_RPS: '1',
      RATE_LIMIT_PRINCIPAL_BURST: '3',
      RATE_LIMIT_ADDRESS_RPS: '0',
    });
    addressApp = await createTestApp(db.url, {
      ...PROXY,
      RATE_LIMIT_ADDRESS_RPS: '1',
      RATE_LIMIT_ADDRESS_BURST: '3',
    });
  });

  afterAll(async () => {
    await principalApp?.close();
    await addressApp?.close();
    await db?.drop();
  });

  const urlOf = async (app: INestApplication) => await loopbackUrl(app, '/mcp');

  it('per principal: past the burst a 429 with Retry-After; another principal is unaffected', async () => {
    const url = await urlOf(principalApp);
    const user = freshUser();
    const before = await rejections(principalApp, 'principal_rate');
    // Ten at once against a bucket of three refilled at one a second: at most 3 + (elapsed seconds) pass.
    const t0 = Date.now();
    const answers = await Promise.all(
      Array.from({ length: 10 }, () => modern(url, 'server/discover', {}, { headers: asUser(user) })),
    );
    const elapsedS = Math.ceil((Date.now() - t0) / 1000);
    const passed = answers.filter((a) => a.status === 200).length;
    const refused = answers.filter((a) => a.status === 429);
    expect(passed + refused.length).toBe(10);
    expect(passed).toBeGreaterThanOrEqual(3);
    expect(passed).toBeLessThanOrEqual(3 + elapsedS);
    expect(Number(refused[0].headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expectQuotaError(refused[0], 'principal_rate', 1, 'RATE_LIMIT_PRINCIPAL_RPS');
    expect(await rejections(principalApp, 'principal_rate')).toBe(before + refused.length);
    const other = await modern(url, 'server/discover', {}, { headers: asUser(freshUser()) });
    expect(other.status).toBe(200);
  });

  it('per client address, before authentication: a flood of bad credentials stops reaching the auth guard', async () => {
    const url = await urlOf(addressApp);
    const authBefore = await metricValue(addressApp, 'mcp_auth_failures_total');
    const before = await rejections(addressApp, 'address_rate');
    const t0 = Date.now();
    const answers = await Promise.all(
      Array.from({ length: 10 }, () =>
        fetch(url, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            accept: 'application/json, text/event-stream',
            'x-forwarded-user': 'mallory',
            'x-auth-proxy-secret': 'not-the-secret-at-all-0000',
          },
          body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }),
        }),
      ),
    );
    const elapsedS = Math.ceil((Date.now() - t0) / 1000);
    const unauthorized = answers.filter((a) => a.status === 401).length;
    const limited = answers.filter((a) => a.status === 429);
    expect(unauthorized + limited.length).toBe(10);
    expect(unauthorized).toBeGreaterThanOrEqual(3);
    expect(unauthorized).toBeLessThanOrEqual(3 + elapsedS);
    expect(Number(limited[0].headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(((await limited[0].json()) as any).error.data).toMatchObject({
      quota: 'address_rate',
      setting: 'RATE_LIMIT_ADDRESS_RPS',
    });
    // Only the requests let through were authenticated (and failed); the limited ones never reached the guard.
    expect(await metricValue(addressApp, 'mcp_auth_failures_total')).toBe(authBefore + unauthorized);
    expect(await rejections(addressApp, 'address_rate')).toBe(before + limited.length);
  });
});
