import { IsInt, Min } from 'class-validator';
import { Describe } from '../../../tool-dispatch/index.js';

export class WordCountOutput {
  @IsInt()
  @Min(0)
  @Describe('Number of words')
  words: number;

  @IsInt()
  @Min(0)
  @Describe('Number of characters')
  characters: number;
}
