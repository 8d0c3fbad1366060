import { ToolTestHarness } from '../../../testing/index.js';
import { loadConfig } from '../../../app.config.js';
import { ExamplesConfig } from '../examples.config.js';
import { ErpBusyError, ErpClient } from './erp-client.js';
import { ErpExportModule } from './erp-export.module.js';

describe('erp_export (example: a downstream that takes two calls at once)', () => {
  let tools: ToolTestHarness;
  beforeAll(async () => {
    tools = await ToolTestHarness.create([ErpExportModule], { env: { EXAMPLE_ERP_EXPORT_MS: '1' } });
  });
  afterAll(async () => {
    await tools.close();
  });

  it("declares the ERP's rules as cluster-wide limits: two at once, one per company", () => {
    const tool = tools.describe('erp_export')!;
    expect(tool.taskSupport).toBe('optional');
    expect(tool.limits).toEqual({ concurrency: 2, perKey: { argument: 'company', concurrency: 1 } });
  });

  it('exports a ledger and says when the ERP ran it', async () => {
    const { result } = await tools.call('erp_export', { company: 'acme', period: '2026-11' });
    expect(result.isError).toBeFalsy();
    const out = result.structuredContent as {
      company: string;
      rows: number;
      startedAt: number;
      finishedAt: number;
    };
    expect(out).toMatchObject({ company: 'acme', period: '2026-11' });
    expect(out.rows).toBeGreaterThanOrEqual(1000);
    expect(out.finishedAt).toBeGreaterThanOrEqual(out.startedAt);
  });

  it('refuses a bad period before the ERP sees it', async () => {
    await expect(tools.call('erp_export', { company: 'acme', period: 'November' })).rejects.toThrow(
      'arguments.period must be a month: YYYY-MM',
    );
  });

  it('stands in for an ERP that refuses a third export at once, and a second of one company', async () => {
    // What the limits protect against: called without them, the ERP refuses.
    const erp = new ErpClient(
      Object.assign(loadConfig({}).get(ExamplesConfig), { EXAMPLE_ERP_EXPORT_MS: 50 }),
    );
    const signal = new AbortController().signal;
    const a = erp.exportLedger('a', '2026-01', signal);
    const b = erp.exportLedger('b', '2026-01', signal);
    await expect(erp.exportLedger('c', '2026-01', signal)).rejects.toBeInstanceOf(ErpBusyError);
    await Promise.all([a, b]);
    const first = erp.exportLedger('a', '2026-01', signal);
    await expect(erp.exportLedger('a', '2026-02', signal)).rejects.toThrow('locked by another export');
    await first;
    expect(erp.busiest).toBe(2);
  });
});
