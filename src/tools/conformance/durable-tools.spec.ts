import 'reflect-metadata';
import { ToolTestHarness } from '../../testing/tool-test-harness.js';
import { ConformanceModule } from './conformance.module.js';

/** The durable fixtures as a handler: resuming from a checkpoint and failing the attempts asked for. */
describe('durable_steps and flaky_job fixtures', () => {
  let tools: ToolTestHarness;
  beforeAll(async () => {
    tools = await ToolTestHarness.create([ConformanceModule]);
  });
  afterAll(async () => {
    await tools.close();
  });

  it('declares the durability the outside checks rely on', () => {
    expect(tools.registry.getTool('durable_steps')).toMatchObject({
      taskSupport: 'optional',
      durability: { resumable: true, maxAttempts: 5 },
    });
    expect(tools.registry.getTool('flaky_job')?.durability.retry).toMatchObject({
      maxAttempts: 5,
      initialDelayMs: 200,
      factor: 2,
    });
    expect(tools.registry.getTool('flaky_job')!.durability.retry!.maxDelayMs).toBeGreaterThanOrEqual(1000);
  });

  it('durable_steps continues after its last checkpoint and says where it started', async () => {
    const { result } = await tools.call(
      'durable_steps',
      { steps: 5, stepMs: 0 },
      { attempt: 2, lastCheckpoint: { completedSteps: 3 } },
    );
    expect(result.structuredContent).toEqual({ completedSteps: 5, attempts: 2, resumedFromStep: 3 });
    expect(result.content).toEqual([
      { type: 'text', text: 'Completed 5 steps on attempt 2 (resumed from step 3)' },
    ]);
    const fresh = await tools.call('durable_steps', { steps: 2, stepMs: 0 });
    expect(fresh.result.structuredContent).toEqual({ completedSteps: 2, attempts: 1, resumedFromStep: 0 });
  });

  it('durable_steps refuses arguments out of range', async () => {
    await expect(tools.call('durable_steps', { steps: 0, stepMs: 0 })).rejects.toThrow('arguments.steps');
    await expect(tools.call('durable_steps', { steps: 1, stepMs: 60001 })).rejects.toThrow(
      'arguments.stepMs',
    );
  });

  it('flaky_job fails its first failTimes attempts, then completes', async () => {
    const failing = await tools.call('flaky_job', { failTimes: 2 }, { attempt: 2 });
    expect(failing.result).toMatchObject({
      isError: true,
      content: [{ type: 'text', text: 'flaky_job attempt 2 failed on purpose (2 set to fail)' }],
    });
    const { result } = await tools.call('flaky_job', { failTimes: 2 }, { attempt: 3 });
    expect(result.structuredContent).toEqual({ attempts: 3 });
    await expect(tools.call('flaky_job', { failTimes: 11 })).rejects.toThrow('arguments.failTimes');
  });
});
