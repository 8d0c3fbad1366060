import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { CallToolResultSchema, ElicitRequestSchema, type Progress } from '@modelcontextprotocol/sdk/types.js';
import { McpTestServer } from '../../src/testing/index.js';
import type { ElicitResult } from '../../src/tool-dispatch/index.js';
import { ApprovalFlowModule } from '../../src/tools/examples/approval-flow/approval-flow.module.js';
import { CustomerLookupModule } from '../../src/tools/examples/customer-lookup/customer-lookup.module.js';
import type { RefundOutcome } from '../../src/tools/examples/approval-flow/refund-outcome.output.js';
import { ReportJobModule } from '../../src/tools/examples/report-job/report-job.module.js';
import { ErpClient } from '../../src/tools/examples/erp-export/erp-client.js';
import { ErpExportModule } from '../../src/tools/examples/erp-export/erp-export.module.js';

const SECRET = 'e2e-directory-secret-42';

/**
 * The example tool modules end to end, written with the testing kit's server level as a team would: the real
 * application serving only these modules, the official SDK client (2025-11-25) and ModernMcpClient (2026-07-28).
 */
describe('example tool modules over real HTTP (testing kit, server level)', () => {
  let server: McpTestServer;
  let directory: Server;
  const directoryHits: string[] = [];

  beforeAll(async () => {
    directory = createServer((req, res) => {
      directoryHits.push(req.headers.authorization ?? '');
      const ok = req.headers.authorization === `Bearer ${SECRET}` && req.url === '/customers/C-7';
      res
        .writeHead(ok ? 200 : 404, { 'content-type': 'application/json' })
        .end(JSON.stringify(ok ? { id: 'C-7', name: 'Katherine Johnson', tier: 'gold' } : {}));
    });
    await new Promise<void>((resolve) => directory.listen(0, '127.0.0.1', resolve));
    server = await McpTestServer.start({
      label: 'examples',
      modules: [ReportJobModule, ApprovalFlowModule, CustomerLookupModule, ErpExportModule],
      env: {
        EXAMPLE_REPORT_STEP_MS: '20',
        // approve_refund's check outlasts the inline window, so with the tasks extension its question comes
        // from a task (input_required, answered with tasks/update) instead of an inline MRTR round.
        TASK_INLINE_WINDOW_MS: '100',
        EXAMPLE_APPROVAL_CHECK_MS: '300',
        EXAMPLE_HTTP_BASE_URL: `http://127.0.0.1:${(directory.address() as AddressInfo).port}`,
        EXAMPLE_HTTP_SECRET: SECRET,
        EXAMPLE_ERP_EXPORT_MS: '300',
      },
    });
  });
  afterAll(async () => {
    await server?.close();
    directory.closeAllConnections();
    await new Promise((resolve) => directory.close(resolve));
  });

  describe('generate_report', () => {
    it('2025-11-25, inline: progress reaches the SDK, then the structured report', async () => {
      const client = await server.connect();
      const { tools } = await client.listTools();
      expect(tools.map((t) => t.name).sort()).toEqual([
        'approve_refund',
        'erp_export',
        'generate_report',
        'lookup_customer',
      ]);
      expect(tools.find((t) => t.name === 'generate_report')?.execution?.taskSupport).toBe('optional');
      const progress: Progress[] = [];
      const result = await client.callTool(
        { name: 'generate_report', arguments: { days: 3, storesPerDay: 100 } },
        CallToolResultSchema,
        { onprogress: (p) => progress.push(p) },
      );
      expect(progress.map((p) => p.progress)).toEqual([1, 2, 3]);
      expect(result.structuredContent).toMatchObject({ days: 3, rowCount: 300 });
    });

    it('2025-11-25, as a task: created, polled to the end, and a second one cancelled', async () => {
      const client = await server.connect();
      let final: any;
      for await (const message of client.experimental.tasks.callToolStream(
        { name: 'generate_report', arguments: { days: 5 } },
        CallToolResultSchema,
        { task: {} },
      )) {
        if (message.type === 'result') final = message.result;
        if (message.type === 'error') throw message.error;
      }
      expect(final.structuredContent).toMatchObject({ days: 5, rowCount: 250 });

      let longId = '';
      for await (const message of client.experimental.tasks.callToolStream(
        { name: 'generate_report', arguments: { days: 120 } },
        CallToolResultSchema,
        { task: {} },
      )) {
        if (message.type === 'taskCreated') {
          longId = message.task.taskId;
          break;
        }
      }
      expect((await client.experimental.tasks.cancelTask(longId)).status).toBe('cancelled');
      expect((await client.experimental.tasks.getTask(longId)).status).toBe('cancelled');
    });

    it('2026-07-28 with the tasks extension: escalates to a task, polled to completion; cancel works too', async () => {
      const client = server.modern();
      const created = await client.callTool('generate_report', { days: 10, storesPerDay: 200 });
      expect(created.resultType).toBe('task');
      const done = await client.waitForTask(created.taskId!);
      expect(done.status).toBe('completed');
      expect(done.result?.structuredContent).toMatchObject({ rowCount: 2000 });

      const long = await client.callTool('generate_report', { days: 120 });
      await client.cancelTask(long.taskId!);
      expect((await client.waitForTask(long.taskId!)).status).toBe('cancelled');
    });
  });

  describe('approve_refund', () => {
    it('2025-11-25, inline: the SDK answers the elicitation and the refund is issued', async () => {
      const client = await server.connect({ capabilities: { elicitation: { form: {} } } });
      const asked: string[] = [];
      client.setRequestHandler(ElicitRequestSchema, (req) => {
        asked.push(req.params.message);
        return { action: 'accept', content: { approved: true } };
      });
      const result = await client.callTool({
        name: 'approve_refund',
        arguments: { orderId: 'ORD-1', amountCents: 1000, reason: 'damaged' },
      });
      expect(asked).toEqual([expect.stringContaining('10.00 for order ORD-1')]);
      expect(result.structuredContent).toMatchObject({ status: 'issued', orderId: 'ORD-1' });
    });

    it('2025-11-25, as a task: input_required, the SDK answers on the GET stream, the task completes', async () => {
      const client = await server.connect({ capabilities: { elicitation: { form: {} } } });
      client.setRequestHandler(ElicitRequestSchema, () => ({
        action: 'accept',
        content: { approved: true },
      }));
      let final: any;
      for await (const message of client.experimental.tasks.callToolStream(
        { name: 'approve_refund', arguments: { orderId: 'ORD-2', amountCents: 1000, reason: 'late' } },
        CallToolResultSchema,
        { task: {} },
      )) {
        if (message.type === 'result') final = message.result;
        if (message.type === 'error') throw message.error;
      }
      expect(final.structuredContent).toMatchObject({ status: 'issued', orderId: 'ORD-2' });
    });

    it('2026-07-28: as a task (tasks/update) and inline (MRTR), each re-run reaching the same questions', async () => {
      const client = server.modern();
      const answers = (key: string) =>
        key.endsWith('confirm_large')
          ? { action: 'accept', content: { orderId: 'ORD-3' } }
          : { action: 'accept', content: { approved: true, note: 'ok' } };
      const asTask = await client.run<RefundOutcome>(
        'approve_refund',
        { orderId: 'ORD-3', amountCents: 90_000, reason: 'wrong size' },
        answers,
      );
      expect(asTask.task?.status).toBe('completed');
      expect(asTask.answeredKeys).toEqual([
        expect.stringMatching(/approval$/),
        expect.stringMatching(/confirm_large$/),
      ]);
      expect(asTask.result.structuredContent).toMatchObject({ status: 'issued', note: 'ok' });

      // The same request again without the tasks extension: inline MRTR rounds, and the refund is not issued twice.
      const inline = server.modern({ capabilities: { elicitation: {} } });
      const again = await inline.run(
        'approve_refund',
        { orderId: 'ORD-3', amountCents: 90_000, reason: 'wrong size' },
        answers,
      );
      expect(again.task).toBeUndefined();
      expect(again.answeredKeys).toEqual(['approval', 'confirm_large']);
      expect(again.result.structuredContent).toMatchObject({
        status: 'already_issued',
        refundId: asTask.result.structuredContent?.refundId,
      });
      expect(asTask.result.structuredContent?.refundId).toMatch(/^RF-/);
    });

    it('2026-07-28 inline, step by step as the guide shows: answer each input_required round by calling again', async () => {
      const client = server.modern({ capabilities: { elicitation: {} } }); // no tasks extension: inline rounds
      const args = { orderId: 'ORD-4', amountCents: 90_000, reason: 'never arrived' };
      const approve: ElicitResult = { action: 'accept', content: { approved: true } };
      const confirm: ElicitResult = { action: 'accept', content: { orderId: 'ORD-4' } };

      const first = await client.callTool('approve_refund', args);
      expect(first.resultType).toBe('input_required');
      expect(Object.keys(first.inputRequests ?? {})).toEqual(['approval']);
      expect(first.inputRequests?.approval.method).toBe('elicitation/create');

      // The re-run reaches the approval (answered) and then asks the second question of a large refund.
      const second = await client.callTool('approve_refund', args, {
        inputResponses: { approval: approve },
        requestState: first.requestState,
      });
      expect(second.resultType).toBe('input_required');
      expect(Object.keys(second.inputRequests ?? {})).toEqual(['confirm_large']);

      // Every answer so far goes back: the server keeps no state between rounds.
      const done = await client.callTool<RefundOutcome>('approve_refund', args, {
        inputResponses: { approval: approve, confirm_large: confirm },
        requestState: second.requestState,
      });
      expect(done.resultType).toBe('complete');
      expect(done.structuredContent?.status).toBe('issued');
      expect(done.structuredContent?.orderId).toBe('ORD-4');
      expect(done.structuredContent?.refundId).toMatch(/^RF-/);
    });
  });

  describe('lookup_customer', () => {
    it('answers through a real client from the loopback service, without ever showing the secret', async () => {
      const client = await server.connect();
      const found = await client.callTool({ name: 'lookup_customer', arguments: { customerId: 'C-7' } });
      expect(found.structuredContent).toEqual({ id: 'C-7', name: 'Katherine Johnson', tier: 'gold' });
      const missing = await client.callTool({ name: 'lookup_customer', arguments: { customerId: 'C-8' } });
      expect(missing).toMatchObject({
        isError: true,
        content: [{ type: 'text', text: 'No customer with id C-8.' }],
      });
      expect(directoryHits.every((h) => h === `Bearer ${SECRET}`)).toBe(true);
      expect(JSON.stringify([found, missing])).not.toContain(SECRET);
    });
  });

  describe('erp_export', () => {
    it('six exports at once of three companies: never more than two in the ERP, one per company, none refused', async () => {
      const client = server.modern();
      const calls = ['acme', 'globex', 'initech'].flatMap((company) =>
        ['2026-10', '2026-11'].map((period) => client.run('erp_export', { company, period })),
      );
      const runs = (await Promise.all(calls)).map(
        (r) => r.result.structuredContent as { company: string; startedAt: number; finishedAt: number },
      );
      expect(runs).toHaveLength(6);
      // The most exports in the ERP at one moment. The peak of a set of intervals falls on some start, so
      // count, at each start, the runs already going then (a run touching one before and one after it is
      // two at once, not three).
      const atOnce = (list: typeof runs): number =>
        Math.max(
          ...list.map(
            (r) => list.filter((o) => o.startedAt <= r.startedAt && r.startedAt < o.finishedAt).length,
          ),
        );
      expect(atOnce(runs)).toBe(2);
      for (const company of ['acme', 'globex', 'initech']) {
        expect(atOnce(runs.filter((r) => r.company === company))).toBe(1);
      }
      // The ERP turned nothing away: the limits never let a third export, or a second of one company, in.
      expect(server.app.get(ErpClient).refused).toBe(0);
    });
  });
});
