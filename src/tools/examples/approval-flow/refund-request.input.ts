import { IsInt, IsString, Matches, Max, MaxLength, Min } from 'class-validator';
import { Describe } from '../../../tool-dispatch/index.js';

export class RefundRequestInput {
  @IsString()
  @Matches(/^[A-Z0-9-]{3,40}$/, { message: 'orderId must be 3 to 40 characters of A-Z, 0-9 and -' })
  @Describe('The order to refund, e.g. ORD-1042')
  orderId: string;

  @IsInt()
  @Min(1)
  @Max(10_000_000)
  @Describe('Amount to refund, in cents')
  amountCents: number;

  @IsString()
  @MaxLength(500)
  @Describe('Why the customer should get the refund (shown to the approver)')
  reason: string;
}
