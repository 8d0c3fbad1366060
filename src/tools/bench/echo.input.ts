import { IsString, MaxLength } from 'class-validator';
import { Describe } from '../../tool-dispatch/index.js';

export class EchoInput {
  @IsString()
  @MaxLength(65_536)
  @Describe('Text returned unchanged')
  text: string;
}
