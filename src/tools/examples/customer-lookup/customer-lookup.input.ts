import { IsString, Matches } from 'class-validator';
import { Describe } from '../../../tool-dispatch/index.js';

export class CustomerLookupInput {
  @IsString()
  @Matches(/^[A-Za-z0-9_-]{1,64}$/, { message: 'customerId must be 1 to 64 letters, digits, _ or -' })
  @Describe('Customer id, e.g. C-1001')
  customerId: string;
}
