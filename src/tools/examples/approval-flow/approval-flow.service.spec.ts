import { testPrincipal, ToolTestHarness } from '../../../testing/index.js';
import type { ElicitResult } from '../../../tool-dispatch/index.js';
import { ApprovalFlowModule } from './approval-flow.module.js';
import type { RefundOutcome } from './refund-outcome.output.js';
import { RefundLedger } from './refund-ledger.service.js';

const REQUEST = { orderId: 'ORD-1042', amountCents: 2_500, reason: 'parcel lost' };
const yes = (note?: string) => ({
  action: 'accept' as const,
  content: { approved: true, ...(note ? { note } : {}) },
});

describe('approve_refund (example approval flow)', () => {
  let tools: ToolTestHarness;
  let ledger: RefundLedger;
  beforeEach(async () => {
    tools = await ToolTestHarness.create([ApprovalFlowModule], { env: { EXAMPLE_APPROVAL_CHECK_MS: '0' } });
    ledger = tools.app.get(RefundLedger);
  });
  afterEach(async () => {
    await tools.close();
  });

  it('asks the approver, then issues the refund once', async () => {
    const { result, inputs } = await tools.call('approve_refund', REQUEST, {
      answers: { elicit: [yes('sorry!')] },
    });
    expect(inputs).toEqual([
      expect.objectContaining({
        method: 'elicitation/create',
        key: 'approval',
        params: expect.objectContaining({ message: expect.stringContaining('25.00 for order ORD-1042') }),
      }),
    ]);
    expect(result.structuredContent).toEqual({
      ...REQUEST_OUT,
      status: 'issued',
      refundId: expect.stringMatching(/^RF-/),
      note: 'sorry!',
    });
    expect(ledger.list()).toHaveLength(1);
  });

  it('issues nothing when the approver declines or dismisses the question', async () => {
    for (const answer of [
      { action: 'accept' as const, content: { approved: false } },
      { action: 'decline' as const },
      { action: 'cancel' as const },
    ]) {
      const { result } = await tools.call('approve_refund', REQUEST, { answers: { elicit: [answer] } });
      expect(result.structuredContent).toMatchObject({ status: 'declined' });
    }
    expect(ledger.list()).toEqual([]);
  });

  it('re-run from the top with the same answers (2026-07-28 style): same questions, one refund', async () => {
    const large = { ...REQUEST, amountCents: 75_000 };
    // Kept in variables, scripted answers are typed with ElicitResult (from the tool API) so 'accept' stays literal.
    const confirm: ElicitResult = { action: 'accept', content: { orderId: 'ORD-1042' } };
    const answers = { elicit: [yes(), confirm] };
    const first = await tools.call<RefundOutcome>('approve_refund', large, { answers, rerunOnInput: true });
    // Run 1 stops at the approval, run 2 at the confirmation, run 3 has both answers and finishes.
    expect(first.runs).toBe(3);
    expect(first.inputs.map((i) => i.key)).toEqual(['approval', 'confirm_large']);
    expect(first.result.structuredContent).toMatchObject({ status: 'issued' });

    // The whole request again (a client retry) with the same answers: the ledger already has it.
    const again = await tools.call<RefundOutcome>('approve_refund', large, { answers, rerunOnInput: true });
    expect(first.result.structuredContent?.refundId).toMatch(/^RF-/);
    expect(again.result.structuredContent?.status).toBe('already_issued');
    expect(again.result.structuredContent?.refundId).toBe(first.result.structuredContent?.refundId);
    expect(ledger.list()).toHaveLength(1);
  });

  it('declines a large refund whose confirmation does not name the order', async () => {
    const { result } = await tools.call(
      'approve_refund',
      { ...REQUEST, amountCents: 75_000 },
      { answers: { elicit: [yes(), { action: 'accept', content: { orderId: 'ORD-9999' } }] } },
    );
    expect(result.structuredContent).toMatchObject({
      status: 'declined',
      note: 'large refund not confirmed',
    });
    expect(ledger.list()).toEqual([]);
  });

  it('keys the refund by order and amount: a second approver finds the first refund', async () => {
    const answers = { elicit: () => yes() };
    const ann = await tools.call('approve_refund', REQUEST, {
      answers,
      principal: testPrincipal({ subject: 'ann' }),
    });
    const bob = await tools.call('approve_refund', REQUEST, {
      answers,
      principal: testPrincipal({ subject: 'bob' }),
    });
    expect(ann.result.structuredContent).toMatchObject({ status: 'issued' });
    expect(bob.result.structuredContent).toMatchObject({ status: 'already_issued' });
    expect(ledger.list().map((r) => r.approvedBy)).toEqual(['proxy:ann']);
    const other = await tools.call('approve_refund', { ...REQUEST, amountCents: 999 }, { answers });
    expect(other.result.structuredContent).toMatchObject({ status: 'issued' });
  });
});

const REQUEST_OUT = { orderId: REQUEST.orderId, amountCents: REQUEST.amountCents };
