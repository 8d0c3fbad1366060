import { IsString } from 'class-validator';
import { Describe } from '../../../tool-dispatch/index.js';

export class EmbeddedResourcePromptArgs {
  @IsString()
  @Describe('URI of the resource to embed')
  resourceUri: string;
}
