import { Injectable, Module } from '@nestjs/common';
import { McpNotifier, McpTool, type ToolContext } from '../tool-dispatch/index.js';
import { testPrincipal } from './recording-tool-context.js';
import { ToolTestHarness } from './tool-test-harness.js';

@Injectable()
class KitProbe {
  sideEffects = 0;
  constructor(private readonly notifier: McpNotifier) {}

  @McpTool({ name: 'two_questions', description: 'Asks twice, then acts once per run that finishes.' })
  async twoQuestions(_args: unknown, ctx: ToolContext): Promise<string> {
    const a = await ctx.input.elicit(
      { message: 'first?', requestedSchema: { type: 'object' } },
      { key: 'a' },
    );
    const roots = await ctx.input.listRoots();
    await ctx.progress({ progress: 1 });
    this.sideEffects += 1;
    await this.notifier.resourceUpdated('probe://done');
    return `${String(a.content?.v)} ${roots.roots.length} ${ctx.principal.id} ${ctx.taskId ?? '-'}`;
  }

  @McpTool({ name: 'guarded', description: 'Needs a scope.', scopes: ['probe:write'] })
  guarded(): string {
    return 'ok';
  }
}

@Module({ providers: [KitProbe] })
class KitProbeModule {}

describe('ToolTestHarness (testing kit, unit level)', () => {
  let tools: ToolTestHarness;
  beforeEach(async () => {
    tools = await ToolTestHarness.create([KitProbeModule]);
  });
  afterEach(async () => {
    await tools.close();
  });

  it('answers each input request from the script, in order, and records requests, progress and notifications', async () => {
    const outcome = await tools.call(
      'two_questions',
      {},
      {
        answers: {
          elicit: [{ action: 'accept', content: { v: 'yes' } }],
          roots: () => ({ roots: [{ uri: 'file:///a' }] }),
        },
        principal: testPrincipal({ subject: 'ann' }),
        taskId: 'task-1',
      },
    );
    expect(outcome.result.content).toEqual([{ type: 'text', text: 'yes 1 proxy:ann task-1' }]);
    expect(outcome.inputs.map((i) => [i.method, i.key])).toEqual([
      ['elicitation/create', 'a'],
      ['roots/list', undefined],
    ]);
    expect(outcome.progress).toEqual([{ progress: 1 }]);
    expect(outcome.runs).toBe(1);
    expect(tools.notifier.updatedUris).toEqual(['probe://done']);
  });

  it('fails the handler like a client without the capability when no answer is scripted', async () => {
    const { result } = await tools.call(
      'two_questions',
      {},
      { answers: { elicit: [{ action: 'decline' }] } },
    );
    expect(result).toEqual({
      isError: true,
      content: [{ type: 'text', text: 'test context: no roots answer scripted' }],
    });
  });

  it('rerunOnInput runs the handler again from the top with every answer so far', async () => {
    const probe = tools.app.get(KitProbe);
    const outcome = await tools.call(
      'two_questions',
      {},
      {
        answers: { elicit: [{ action: 'accept', content: { v: 'x' } }], roots: [{ roots: [] }] },
        rerunOnInput: true,
      },
    );
    expect(outcome.runs).toBe(3);
    expect(outcome.inputs.map((i) => i.method)).toEqual(['elicitation/create', 'roots/list']);
    expect(outcome.result.content).toEqual([{ type: 'text', text: 'x 0 anonymous:dev -' }]);
    expect(probe.sideEffects).toBe(1);
  });

  it('checks scopes like the server: refused without them, served with them', async () => {
    await expect(tools.call('guarded', {}, { principal: testPrincipal() })).rejects.toMatchObject({
      code: 'INSUFFICIENT_SCOPE',
      data: { requiredScopes: ['probe:write'] },
    });
    const { result } = await tools.call(
      'guarded',
      {},
      { principal: testPrincipal({ scopes: ['probe:write'] }) },
    );
    expect(result.content).toEqual([{ type: 'text', text: 'ok' }]);
  });
});
