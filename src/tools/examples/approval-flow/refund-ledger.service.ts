import { Injectable } from '@nestjs/common';
import { createHash } from 'node:crypto';

export interface IssuedRefund {
  refundId: string;
  orderId: string;
  amountCents: number;
  approvedBy: string;
  issuedAt: Date;
}

/**
 * Where refunds are issued: the example's side effect. In memory here; a real module would write a row with a
 * unique constraint on the idempotency key, in the same transaction as the business change. The key is made
 * of what was decided (which order, which amount), never of the run, the task or the approver, so a handler that
 * runs again with the same answers, a client that retries the whole call, or a second approver all find the
 * refund issued before instead of issuing another.
 */
@Injectable()
export class RefundLedger {
  private readonly issued = new Map<string, IssuedRefund>();

  issueOnce(request: Omit<IssuedRefund, 'refundId' | 'issuedAt'>): {
    refund: IssuedRefund;
    created: boolean;
  } {
    const key = createHash('sha256')
      .update(JSON.stringify([request.orderId, request.amountCents]))
      .digest('base64url');
    const existing = this.issued.get(key);
    if (existing) return { refund: existing, created: false };
    const refund = { ...request, refundId: `RF-${key.slice(0, 12)}`, issuedAt: new Date() };
    this.issued.set(key, refund);
    return { refund, created: true };
  }

  /** Every refund issued so far (for tests and audits). */
  list(): IssuedRefund[] {
    return [...this.issued.values()];
  }
}
