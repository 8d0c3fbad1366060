import { ToolTestHarness } from '../../../testing/index.js';
import { ReportJobModule } from './report-job.module.js';

describe('generate_report (example report job)', () => {
  let tools: ToolTestHarness;
  beforeAll(async () => {
    tools = await ToolTestHarness.create([ReportJobModule], { env: { EXAMPLE_REPORT_STEP_MS: '1' } });
  });
  afterAll(async () => {
    await tools.close();
  });

  it('is task-optional and publishes an output schema for its structured result', () => {
    const tool = tools.describe('generate_report')!;
    expect(tool.taskSupport).toBe('optional');
    expect(tool.outputSchema).toMatchObject({
      type: 'object',
      required: expect.arrayContaining(['region', 'days', 'rowCount', 'totals', 'rows']),
    });
  });

  it('reports progress once per day and returns every row with matching totals', async () => {
    const { result, progress, logs } = await tools.call('generate_report', {
      region: 'emea',
      days: 4,
      storesPerDay: 30,
    });
    expect(progress.map((p) => [p.progress, p.total])).toEqual([
      [1, 4],
      [2, 4],
      [3, 4],
      [4, 4],
    ]);
    const report = result.structuredContent as {
      rowCount: number;
      rows: { orders: number; revenueCents: number }[];
      totals: { orders: number; revenueCents: number };
    };
    expect(report.rowCount).toBe(120);
    expect(report.rows).toHaveLength(120);
    expect(report.totals.orders).toBe(report.rows.reduce((n, r) => n + r.orders, 0));
    expect(report.totals.revenueCents).toBe(report.totals.orders * 2_499);
    expect(JSON.parse((result.content[0] as { text: string }).text)).toEqual(report);
    expect(logs).toEqual([
      expect.objectContaining({ level: 'info', data: { message: 'report ready', rows: 120 } }),
    ]);
  });

  it('stops at the step it is on when cancelled: the call rejects and no further step runs', async () => {
    const slow = await ToolTestHarness.create([ReportJobModule], { env: { EXAMPLE_REPORT_STEP_MS: '100' } });
    try {
      const cancel = new AbortController();
      const steps: number[] = [];
      const running = slow.call(
        'generate_report',
        { days: 50 },
        {
          signal: cancel.signal,
          onProgress: (p) => {
            steps.push(p.progress);
            if (p.progress === 2) cancel.abort();
          },
        },
      );
      await expect(running).rejects.toMatchObject({ name: 'AbortError' });
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(steps).toEqual([1, 2]);
    } finally {
      await slow.close();
    }
  });

  it('refuses out-of-range arguments before doing any work', async () => {
    await expect(tools.call('generate_report', { days: 0, region: 'mars' })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENTS',
      data: { problems: expect.arrayContaining([expect.stringMatching(/^arguments\.days/)]) },
    });
  });
});
