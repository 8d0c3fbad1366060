import { IsBoolean, IsOptional, IsString, MaxLength } from 'class-validator';
import { Describe } from '../../../tool-dispatch/index.js';

export class WordCountInput {
  @IsString()
  @MaxLength(100_000)
  @Describe('The text whose words are counted')
  text: string;

  @IsOptional()
  @IsBoolean()
  @Describe('Count each distinct word once (case-insensitive)')
  unique?: boolean = false;
}
