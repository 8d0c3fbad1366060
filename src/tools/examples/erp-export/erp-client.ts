import { Injectable } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { ExamplesConfig } from '../examples.config.js';

/** The ERP refused an export: it already runs as many as it allows (a real one answers 429 or 503). */
export class ErpBusyError extends Error {
  override name = 'ErpBusyError';
}

/** One ledger export as the ERP answers it. */
export interface LedgerExport {
  rows: number;
  startedAt: number;
  finishedAt: number;
}

/**
 * A stand-in for an ERP's export API, the kind of downstream `erp_export` protects: it runs at most two
 * exports at once, and one per company (an export locks the company's ledger), and refuses anything beyond
 * that instead of queueing it. The tool's declared limits keep every instance of the server inside those
 * rules; `busiest` records the most exports this process ever had going at once and `refused` how many it
 * turned away, for tests.
 */
@Injectable()
export class ErpClient {
  static readonly MAX_EXPORTS = 2;
  private readonly running = new Map<string, number>();
  private total = 0;
  busiest = 0;
  refused = 0;

  constructor(private readonly config: ExamplesConfig) {}

  async exportLedger(company: string, period: string, signal: AbortSignal): Promise<LedgerExport> {
    if (this.total >= ErpClient.MAX_EXPORTS) {
      this.refused++;
      throw new ErpBusyError(`the ERP runs ${ErpClient.MAX_EXPORTS} exports at once and refused another`);
    }
    if ((this.running.get(company) ?? 0) > 0) {
      this.refused++;
      throw new ErpBusyError(`the ledger of ${company} is locked by another export`);
    }
    this.total++;
    this.busiest = Math.max(this.busiest, this.total);
    this.running.set(company, 1);
    const startedAt = Date.now();
    try {
      await sleep(this.config.EXAMPLE_ERP_EXPORT_MS, undefined, { signal });
      // A stable row count per company and period: the same export gives the same answer.
      const rows = [...`${company}/${period}`].reduce((n, c) => (n * 31 + c.charCodeAt(0)) % 9000, 7) + 1000;
      return { rows, startedAt, finishedAt: Date.now() };
    } finally {
      this.total--;
      this.running.delete(company);
    }
  }
}
