import { IsString } from 'class-validator';
import { Describe } from '../../../tool-dispatch/index.js';

export class MessageInput {
  @IsString()
  @Describe('The message to show the user')
  message: string;
}
