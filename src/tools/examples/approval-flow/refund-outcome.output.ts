import { IsIn, IsInt, IsOptional, IsString } from 'class-validator';
import { Describe } from '../../../tool-dispatch/index.js';

export const REFUND_STATUSES = ['issued', 'already_issued', 'declined'] as const;
export type RefundStatus = (typeof REFUND_STATUSES)[number];

export class RefundOutcome {
  @IsIn(REFUND_STATUSES)
  @Describe('issued now, already issued by an earlier run with the same answers, or declined by the approver')
  status: RefundStatus;

  @IsString()
  orderId: string;

  @IsInt()
  amountCents: number;

  @IsOptional()
  @IsString()
  @Describe('Id of the refund, the same on every re-run')
  refundId?: string;

  @IsOptional()
  @IsString()
  @Describe("The approver's note")
  note?: string;
}
