import { IsString } from 'class-validator';
import { Describe } from '../../../tool-dispatch/index.js';

export class FilenameInput {
  @IsString()
  @Describe('The file to delete')
  filename: string;
}
