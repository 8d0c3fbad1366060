import { Injectable } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { McpTool, type ToolContext } from '../../../tool-dispatch/index.js';
import { ReportJobInput } from './report-job.input.js';
import { ReportOutput, type ReportRow } from './report-job.output.js';
import { ExamplesConfig } from '../examples.config.js';

/**
 * A long-running job: one step of work per day (EXAMPLE_REPORT_STEP_MS each, 5 s by default, so the default
 * 12 days take a minute), progress after each step, cancellation honoured between and during steps, and a large
 * structured result. With `taskSupport: 'optional'` the same handler runs inline or as a task: the server
 * decides from what the client asked for; the handler does not know or care.
 */
@Injectable()
export class ReportJobService {
  constructor(private readonly config: ExamplesConfig) {}

  @McpTool({
    name: 'generate_report',
    title: 'Generate sales report',
    description:
      'Builds a daily sales report for a region, one day per step (takes minutes; run it as a task). ' +
      'Returns totals and every store row.',
    input: ReportJobInput,
    output: ReportOutput,
    taskSupport: 'optional',
    annotations: { readOnlyHint: true },
  })
  async generateReport(args: ReportJobInput, ctx: ToolContext): Promise<ReportOutput> {
    const days = args.days ?? 12;
    const rows: ReportRow[] = [];
    for (let day = 1; day <= days; day++) {
      // The abort (a client cancel, a task cancel, a server drain) ends the sleep with an AbortError; it
      // propagates as a cancellation, never as a tool error result.
      await sleep(this.config.EXAMPLE_REPORT_STEP_MS, undefined, { signal: ctx.signal });
      rows.push(...dayRows(args.region ?? 'all', day, args.storesPerDay ?? 50));
      await ctx.progress({ progress: day, total: days, message: `day ${day} of ${days} aggregated` });
    }
    const totals = rows.reduce(
      (t, r) => ({ orders: t.orders + r.orders, revenueCents: t.revenueCents + r.revenueCents }),
      { orders: 0, revenueCents: 0 },
    );
    await ctx.log('info', { message: 'report ready', rows: rows.length }, 'generate_report');
    return { region: args.region ?? 'all', days, rowCount: rows.length, totals, rows };
  }
}

/** Deterministic sample figures (a real job would query a warehouse here), so tests can check totals. */
function dayRows(region: string, day: number, stores: number): ReportRow[] {
  return Array.from({ length: stores }, (_, i) => {
    const orders = ((day * 31 + i * 17 + region.length * 7) % 90) + 10;
    return {
      day,
      store: `${region}-${String(i + 1).padStart(3, '0')}`,
      orders,
      revenueCents: orders * 2_499,
    };
  });
}
