import { IsString } from 'class-validator';
import { Describe } from '../../../tool-dispatch/index.js';

export class PromptInput {
  @IsString()
  @Describe('The prompt to send to the LLM')
  prompt: string;
}
