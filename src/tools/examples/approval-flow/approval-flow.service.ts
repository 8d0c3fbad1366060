import { Injectable } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { McpTool, type ElicitResult, type ToolContext } from '../../../tool-dispatch/index.js';
import { RefundOutcome } from './refund-outcome.output.js';
import { RefundLedger } from './refund-ledger.service.js';
import { RefundRequestInput } from './refund-request.input.js';
import { ExamplesConfig } from '../examples.config.js';

/** At or above this amount a second, explicit confirmation is asked for. */
export const LARGE_REFUND_CENTS = 50_000;

/**
 * A person approves mid-run. `ctx.input.elicit` looks like an ordinary await, but in the 2026-07-28 era (and for
 * any task answered through tasks/update) the handler does not wait: the run ends at the question, and once the
 * answer arrives the handler runs again from the top with every answer so far, each `elicit` returning its
 * recorded answer at once. So the handler must (1) ask the same questions in the same order, with stable keys,
 * given the same arguments and answers, and (2) do its side effect only after the last question, idempotently
 * (RefundLedger.issueOnce): a retried request, or a run repeated after a crash, must not refund twice.
 */
@Injectable()
export class ApprovalFlowService {
  constructor(
    private readonly ledger: RefundLedger,
    private readonly config: ExamplesConfig,
  ) {}

  @McpTool({
    name: 'approve_refund',
    title: 'Refund with approval',
    description:
      'Asks a person to approve a refund for an order (and to confirm large ones), then issues it once. ' +
      'Reports issued, already_issued or declined.',
    input: RefundRequestInput,
    output: RefundOutcome,
    taskSupport: 'optional',
    annotations: { destructiveHint: false, idempotentHint: true },
  })
  async approveRefund(args: RefundRequestInput, ctx: ToolContext): Promise<RefundOutcome> {
    // Stands in for loading the order and checking the refund policy. It runs again on every re-run, so it
    // must be read-only; and because it outlasts TASK_INLINE_WINDOW_MS, a 2026-07-28 client that declared the
    // tasks extension gets a task whose status turns input_required, rather than an inline MRTR round.
    await sleep(this.config.EXAMPLE_APPROVAL_CHECK_MS, undefined, { signal: ctx.signal });
    const amount = (args.amountCents / 100).toFixed(2);
    const decision = await ctx.input.elicit(
      {
        message: `Approve a refund of ${amount} for order ${args.orderId}? Reason given: ${args.reason}`,
        requestedSchema: {
          type: 'object',
          properties: {
            approved: { type: 'boolean', title: 'Approve the refund' },
            note: { type: 'string', title: 'Note for the customer', maxLength: 200 },
          },
          required: ['approved'],
        },
      },
      { key: 'approval' },
    );
    const base = { orderId: args.orderId, amountCents: args.amountCents };
    const note = typeof decision.content?.note === 'string' ? decision.content.note : undefined;
    if (!accepted(decision, 'approved')) return { ...base, status: 'declined', ...(note ? { note } : {}) };

    if (args.amountCents >= LARGE_REFUND_CENTS) {
      // A question that depends only on the arguments and earlier answers: every re-run reaches it again.
      const confirm = await ctx.input.elicit(
        {
          message: `${amount} is a large refund. Type the order id (${args.orderId}) to confirm.`,
          requestedSchema: {
            type: 'object',
            properties: { orderId: { type: 'string', title: 'Order id' } },
            required: ['orderId'],
          },
        },
        { key: 'confirm_large' },
      );
      if (confirm.action !== 'accept' || confirm.content?.orderId !== args.orderId) {
        return { ...base, status: 'declined', note: 'large refund not confirmed' };
      }
    }

    const { refund, created } = this.ledger.issueOnce({ ...base, approvedBy: ctx.principal.id });
    await ctx.log('info', {
      message: created ? 'refund issued' : 'refund already issued',
      refundId: refund.refundId,
    });
    return {
      ...base,
      status: created ? 'issued' : 'already_issued',
      refundId: refund.refundId,
      ...(note ? { note } : {}),
    };
  }
}

function accepted(answer: ElicitResult, field: string): boolean {
  return answer.action === 'accept' && answer.content?.[field] === true;
}
