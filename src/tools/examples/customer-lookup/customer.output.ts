import { IsOptional, IsString } from 'class-validator';

/** What the customer directory answers for one customer (the fields the model may see). */
export class CustomerOutput {
  @IsString()
  id: string;

  @IsString()
  name: string;

  @IsOptional()
  @IsString()
  tier?: string;
}
