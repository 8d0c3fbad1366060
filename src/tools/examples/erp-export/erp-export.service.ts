import { Injectable } from '@nestjs/common';
import { McpTool, type CallToolResult, type ToolContext } from '../../../tool-dispatch/index.js';
import { ErpClient, ErpBusyError } from './erp-client.js';
import { ErpExportInput } from './erp-export.input.js';
import { ErpExportOutput } from './erp-export.output.js';

/**
 * Example: a tool in front of a downstream that takes two calls at once (docs/tool-authoring.md, "Sharing
 * the queue"). The limits say so once, for the whole cluster: however many instances run and however many
 * callers ask, at most two exports run, one per company; the others wait as `working` tasks whose
 * statusMessage names the limit, and start as places free. The tool itself never counts or waits.
 */
@Injectable()
export class ErpExportService {
  constructor(private readonly erp: ErpClient) {}

  @McpTool({
    name: 'erp_export',
    title: 'Export a ledger from the ERP',
    description:
      "Exports one company's ledger for one month from the ERP. The ERP runs two exports at once and one " +
      'per company; calls beyond that wait their turn as tasks.',
    input: ErpExportInput,
    output: ErpExportOutput,
    taskSupport: 'optional',
    limits: { concurrency: ErpClient.MAX_EXPORTS, perKey: { argument: 'company', concurrency: 1 } },
    // A refusal by the ERP (another client of it took a place) is worth another try a little later.
    durability: {
      retry: { maxAttempts: 3, initialDelayMs: 1000, retryOn: (e) => e instanceof ErpBusyError },
    },
    annotations: { readOnlyHint: true },
  })
  async erpExport(args: ErpExportInput, ctx: ToolContext): Promise<CallToolResult> {
    const done = await this.erp.exportLedger(args.company, args.period, ctx.signal);
    const out: ErpExportOutput = { company: args.company, period: args.period, ...done };
    return {
      content: [
        { type: 'text', text: `Exported ${out.rows} ledger rows of ${out.company} for ${out.period}` },
      ],
      structuredContent: { ...out },
    };
  }
}
