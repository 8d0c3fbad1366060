import { IsIn, IsOptional, IsString } from 'class-validator';
import { Describe } from '../../../tool-dispatch/index.js';

export const SUMMARY_STYLES = ['bullet-points', 'one-paragraph', 'tweet'] as const;

export class SummaryPromptArgs {
  @IsString()
  @Describe('The text to summarise')
  text: string;

  @IsOptional()
  @IsIn(SUMMARY_STYLES)
  @Describe(`How to summarise: ${SUMMARY_STYLES.join(', ')}`)
  style?: string;
}
