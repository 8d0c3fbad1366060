import type { INestApplication } from '@nestjs/common';
import { randomBytes } from 'node:crypto';
import {
  LEGACY,
  MODERN,
  modernMeta,
  openStream,
  responseOf,
  rpc,
  type RpcAnswer,
} from '../support/mcp-http.js';
import {
  asUser,
  EXT_CAPS,
  freshUser,
  LegacyClient,
  listenInit,
  modern,
  nextMatching,
  PROXY_SECRET,
  SUBSCRIPTION_ID,
  waitFor,
} from '../support/tasks-e2e.js';
import { createTestApp } from '../support/test-app.js';
import { createTestDatabase, withClient, type TestDatabase } from '../support/test-database.js';

const ELICIT = { elicitation: {} };
const FIXED_ID = 4242;

/** A well-formed id nobody holds (same shape as the server's: 18 random bytes, base64url). */
function randomTaskId(): string {
  return randomBytes(18).toString('base64url');
}

/**
 * Ownership (issue 6): behind the SSO proxy, principal A's tasks and sessions do not exist for principal B.
 * "Byte for byte": every probe is sent twice with the same JSON-RPC id, once naming A's task and once a
 * random id, and the two HTTP answers (status and body text) must be identical.
 */
describe('task and session isolation between principals (both eras)', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let url: string;

  const userA = freshUser('alice');
  const userB = freshUser('bob');
  let alice: LegacyClient;
  let bob: LegacyClient;
  /** A's tasks: created in each era, live and finished, one parked as input_required. */
  const tasks: Record<string, string> = {};

  async function legacyRaw(
    c: LegacyClient,
    method: string,
    params: Record<string, unknown>,
  ): Promise<RpcAnswer> {
    return rpc(url, { jsonrpc: '2.0', id: FIXED_ID, method, params }, c.headers());
  }

  async function modernRaw(
    user: string,
    method: string,
    params: Record<string, unknown>,
  ): Promise<RpcAnswer> {
    const name = typeof params.taskId === 'string' ? params.taskId : undefined;
    return rpc(
      url,
      { jsonrpc: '2.0', id: FIXED_ID, method, params: { ...params, _meta: modernMeta(EXT_CAPS) } },
      {
        'mcp-protocol-version': MODERN,
        'mcp-method': method,
        ...(name !== undefined ? { 'mcp-name': name } : {}),
        ...asUser(user),
      },
    );
  }

  const same = (foreign: RpcAnswer, unknown: RpcAnswer) => {
    expect({ status: foreign.status, text: foreign.text }).toEqual({
      status: unknown.status,
      text: unknown.text,
    });
  };

  const legacyStatus = async (c: LegacyClient, taskId: string) =>
    (await c.result('tasks/get', { taskId })).status;

  beforeAll(async () => {
    db = await createTestDatabase('tasks_iso');
    app = await createTestApp(db.url, {
      MCP_CONFORMANCE_FIXTURES: 'true',
      AUTH_PROVIDERS: 'proxy',
      AUTH_PROXY_SECRET: PROXY_SECRET,
    });
    url = `${await app.getUrl()}/mcp`;
    alice = await LegacyClient.open(url, {}, asUser(userA));
    bob = await LegacyClient.open(url, {}, asUser(userB));

    tasks.legacyLive = (await alice.createTask('slow_compute', { seconds: 120 })).taskId;
    const done = await alice.createTask('slow_compute', { seconds: 0, label: 'done' });
    await waitFor(
      () => legacyStatus(alice, done.taskId),
      (s) => s === 'completed',
    );
    tasks.legacyDone = done.taskId;

    const call = async (name: string, args: Record<string, unknown>) =>
      responseOf(
        await modern(url, 'tools/call', { name, arguments: args }, { caps: ELICIT, headers: asUser(userA) }),
      ).result;
    tasks.modernLive = (await call('slow_compute', { seconds: 120 })).taskId;
    tasks.modernParked = (await call('confirm_delete', { filename: 'secret.txt' })).taskId;
    await waitFor(
      async () =>
        responseOf(await modernRaw(userA, 'tasks/get', { taskId: tasks.modernParked })).result.status,
      (s) => s === 'input_required',
    );
    for (const id of Object.values(tasks)) expect(id).toMatch(/^[A-Za-z0-9_-]{24}$/);
  });
  afterAll(async () => {
    await app.close();
    await db.drop();
  });

  it('2025-11-25: tasks/get, tasks/result and tasks/cancel on A’s tasks answer B exactly as for a random id', async () => {
    for (const taskId of Object.values(tasks)) {
      for (const method of ['tasks/get', 'tasks/result', 'tasks/cancel']) {
        const foreign = await legacyRaw(bob, method, { taskId });
        const unknown = await legacyRaw(bob, method, { taskId: randomTaskId() });
        same(foreign, unknown);
        expect(responseOf(foreign)).toEqual({
          jsonrpc: '2.0',
          id: FIXED_ID,
          error: { code: -32602, message: 'Task not found' },
        });
      }
    }
  });

  it('2026-07-28: tasks/get, tasks/update and tasks/cancel on A’s tasks answer B exactly as for a random id', async () => {
    for (const taskId of Object.values(tasks)) {
      for (const [method, extra] of [
        ['tasks/get', {}],
        [
          'tasks/update',
          { inputResponses: { 'r1.confirm_delete': { action: 'accept', content: { confirm: true } } } },
        ],
        ['tasks/cancel', {}],
      ] as const) {
        const foreign = await modernRaw(userB, method, { taskId, ...extra });
        const unknown = await modernRaw(userB, method, { taskId: randomTaskId(), ...extra });
        same(foreign, unknown);
        expect(responseOf(foreign).error).toEqual({ code: -32602, message: 'Task not found' });
        expect(foreign.text).not.toContain(taskId);
      }
    }
  });

  it('B’s attempts changed nothing: A still sees its tasks as they were', async () => {
    expect(await legacyStatus(alice, tasks.legacyLive)).toBe('working');
    expect(await legacyStatus(alice, tasks.legacyDone)).toBe('completed');
    const parked = responseOf(await modernRaw(userA, 'tasks/get', { taskId: tasks.modernParked })).result;
    expect(parked.status).toBe('input_required');
    expect(Object.keys(parked.inputRequests)).toHaveLength(1);
    const live = responseOf(await modernRaw(userA, 'tasks/get', { taskId: tasks.modernLive })).result;
    expect(live.status).toBe('working');
    const result = await alice.result('tasks/result', { taskId: tasks.legacyDone });
    expect(result.content).toEqual([{ type: 'text', text: 'Computed done after 0 s' }]);
  });

  it('tasks/list never shows another principal’s task', async () => {
    const own = await bob.createTask('slow_compute', { seconds: 0 });
    const listed = await bob.result('tasks/list');
    expect(listed.tasks.map((t: { taskId: string }) => t.taskId)).toEqual([own.taskId]);
    const aliceListed = (await alice.result('tasks/list')).tasks.map((t: { taskId: string }) => t.taskId);
    expect(aliceListed).not.toContain(own.taskId);
    // tasks/list lists A's tasks of both eras (what tasks/get can reach, tasks/list can list).
    expect([...aliceListed].sort()).toEqual(Object.values(tasks).sort());
  });

  it('A’s session id used by B is the same 404 as an unknown session, for POST, GET and DELETE', async () => {
    const unknownSession = randomBytes(16).toString('hex');
    const post = (sessionId: string) =>
      rpc(
        url,
        { jsonrpc: '2.0', id: FIXED_ID, method: 'tools/list', params: {} },
        { 'mcp-session-id': sessionId, 'mcp-protocol-version': LEGACY, ...asUser(userB) },
      );
    const foreign = await post(alice.sessionId);
    const unknown = await post(unknownSession);
    expect(foreign.status).toBe(404);
    same(foreign, unknown);

    for (const method of ['GET', 'DELETE']) {
      const probe = async (sessionId: string) => {
        const res = await fetch(url, {
          method,
          headers: {
            accept: 'text/event-stream',
            'mcp-session-id': sessionId,
            'mcp-protocol-version': LEGACY,
            ...asUser(userB),
          },
        });
        return { status: res.status, text: await res.text() };
      };
      const f = await probe(alice.sessionId);
      const u = await probe(unknownSession);
      expect(f.status).toBe(404);
      expect(f).toEqual(u);
    }
    // A's session survived B's DELETE.
    expect((await alice.call('ping')).result).toEqual({});
  });

  it('subscriptions/listen by B on A’s ids acknowledges none and delivers nothing', async () => {
    const listen = (user: string, taskIds: string[]) =>
      openStream(url, listenInit(user, { taskIds }, { id: 'listen-1' }));
    const ids = [tasks.modernLive, tasks.legacyLive];
    const theirs = await listen(userB, ids);
    const mine = await listen(userA, ids);
    try {
      const bobAck = await theirs.next();
      expect(bobAck.json.params).toEqual({
        _meta: { [SUBSCRIPTION_ID]: 'listen-1' },
        notifications: { taskIds: [] },
      });
      const aliceAck = await mine.next();
      expect(aliceAck.json.params.notifications.taskIds).toEqual(ids);

      const ack = responseOf(await modernRaw(userA, 'tasks/cancel', { taskId: tasks.modernLive })).result;
      expect(ack.resultType).toBe('complete');
      const seen = await nextMatching(mine, (ev) => ev.json?.params?.status === 'cancelled');
      expect(seen.event.json.params.taskId).toBe(tasks.modernLive);
      // A heard it; B, subscribed to the same id on the same instance, must not.
      await expect(theirs.next(700)).rejects.toThrow('no SSE event in time');
    } finally {
      theirs.close();
      mine.close();
    }
  });

  it('the same user sending again (a new session, a new request) keeps its tasks', async () => {
    const again = await LegacyClient.open(url, {}, asUser(userA));
    expect(again.sessionId).not.toBe(alice.sessionId);
    const got = await again.result('tasks/get', { taskId: tasks.legacyDone });
    expect(got.status).toBe('completed');
    const result = await again.result('tasks/result', { taskId: tasks.legacyDone });
    expect(result.content).toEqual([{ type: 'text', text: 'Computed done after 0 s' }]);
    const listed = (await again.result('tasks/list')).tasks.map((t: { taskId: string }) => t.taskId);
    expect(listed).toEqual(expect.arrayContaining(Object.values(tasks)));
    const modernGot = responseOf(await modernRaw(userA, 'tasks/get', { taskId: tasks.modernParked })).result;
    expect(modernGot.status).toBe('input_required');
    // One principal row for the user, however many requests and sessions.
    const rows = await withClient(db.url, (c) =>
      c.query(`SELECT count(*)::int AS n FROM principal WHERE subject = $1`, [userA]),
    );
    expect(rows.rows[0].n).toBe(1);
    const cancelled = await again.result('tasks/cancel', { taskId: tasks.legacyLive });
    expect(cancelled.status).toBe('cancelled');
  });
});
