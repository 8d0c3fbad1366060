import { Injectable, Module, type INestApplication } from '@nestjs/common';
import { CheckpointError, McpTool, type ToolContext } from '../../src/tool-dispatch/index.js';
import { metricValue } from '../support/controlled-executor.js';
import { responseOf } from '../support/mcp-http.js';
import { asUser, freshUser, LegacyClient, modern, PROXY_SECRET, waitFor } from '../support/tasks-e2e.js';
import { createTestApp, loopbackUrl } from '../support/test-app.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';

const LIMIT = 300;
const BYTES_INPUT = {
  type: 'object',
  properties: { bytes: { type: 'integer', minimum: 0, maximum: 10000 } },
  required: ['bytes'],
  additionalProperties: false,
};

/** Saves a checkpoint of `bytes` characters and answers what the server said about it. */
async function saveAndSay(bytes: unknown, ctx: ToolContext): Promise<string> {
  try {
    await ctx.checkpoint({ pad: 'x'.repeat(Number(bytes)) });
    return 'saved';
  } catch (err) {
    return err instanceof CheckpointError ? `refused: ${err.message}` : `threw: ${String(err)}`;
  }
}

/** The three places a checkpoint is checked: a call that is never a task, the inline window, a task's run. */
@Injectable()
class CheckpointProbeTools {
  @McpTool({ name: 'checkpoint_inline_only', description: 'Checkpoints; never a task.', input: BYTES_INPUT })
  inlineOnly(args: { bytes?: number }, ctx: ToolContext): Promise<string> {
    return saveAndSay(args.bytes, ctx);
  }

  @McpTool({
    name: 'checkpoint_task',
    description: 'Checkpoints; may run as a task.',
    input: BYTES_INPUT,
    taskSupport: 'optional',
    durability: { resumable: true },
  })
  task(args: { bytes?: number }, ctx: ToolContext): Promise<string> {
    return saveAndSay(args.bytes, ctx);
  }
}
@Module({ providers: [CheckpointProbeTools] })
class CheckpointProbeModule {}

const textOf = (result: any): string => result?.content?.[0]?.text;

/**
 * A checkpoint over QUOTA_TASK_CHECKPOINT_BYTES is a quota refusal like any other: counted in
 * mcp_quota_rejections_total{quota="task_checkpoint_bytes"} wherever it is refused (issue 22's leftover),
 * and nothing else (a checkpoint that fits, or one that is not JSON) is counted there.
 */
describe('checkpoint size refusals are counted as quota rejections (real HTTP)', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let url: string;
  const refusals = (): Promise<number> =>
    metricValue(app, 'mcp_quota_rejections_total', { quota: 'task_checkpoint_bytes' });

  beforeAll(async () => {
    db = await createTestDatabase('checkpoint_quota');
    app = await createTestApp(
      db.url,
      {
        AUTH_PROVIDERS: 'proxy',
        AUTH_PROXY_SECRET: PROXY_SECRET,
        QUOTA_TASK_CHECKPOINT_BYTES: String(LIMIT),
        TASK_INLINE_WINDOW_MS: '5000',
      },
      [CheckpointProbeModule],
    );
    url = await loopbackUrl(app, '/mcp');
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  it('starts at 0, so the quota is listed before its first refusal', async () => {
    expect(await refusals()).toBe(0);
  });

  it('counts a refusal of a call that can never be a task, and not a checkpoint that fits', async () => {
    const headers = asUser(freshUser());
    const call = async (bytes: number): Promise<string> =>
      textOf(
        responseOf(
          await modern(
            url,
            'tools/call',
            { name: 'checkpoint_inline_only', arguments: { bytes } },
            { headers },
          ),
        )?.result,
      );
    const before = await refusals();
    expect(await call(10)).toBe('saved');
    expect(await refusals()).toBe(before);
    expect(await call(600)).toMatch(/^refused: .*over QUOTA_TASK_CHECKPOINT_BYTES = 300 bytes$/);
    expect(await refusals()).toBe(before + 1);
  });

  it('counts a refusal inside the inline window of a modern call', async () => {
    const headers = asUser(freshUser());
    const before = await refusals();
    const answer = await modern(
      url,
      'tools/call',
      { name: 'checkpoint_task', arguments: { bytes: 600 } },
      { headers },
    );
    expect(textOf(responseOf(answer)?.result)).toMatch(/^refused: .*QUOTA_TASK_CHECKPOINT_BYTES/);
    expect(await refusals()).toBe(before + 1);
  });

  it("counts a refusal of a task's run", async () => {
    const client = await LegacyClient.open(url, {}, asUser(freshUser()));
    const before = await refusals();
    const { taskId } = await client.createTask('checkpoint_task', { bytes: 600 });
    await waitFor(
      () => client.result('tasks/get', { taskId }),
      (t) => t.status === 'completed',
      { what: 'the task to complete' },
    );
    const result = await client.result('tasks/result', { taskId });
    expect(textOf(result)).toMatch(/^refused: .*QUOTA_TASK_CHECKPOINT_BYTES/);
    expect(await refusals()).toBe(before + 1);
  });
});
