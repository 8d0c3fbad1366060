import { IsString } from 'class-validator';
import { Describe } from '../../../tool-dispatch/index.js';

export class GreetInput {
  @IsString()
  @Describe('Who to greet')
  name: string;
}
