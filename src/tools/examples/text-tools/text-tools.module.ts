import { Module } from '@nestjs/common';
import { TextToolsService } from './text-tools.service.js';

/** Owned by the text-utilities team. Listed in src/tools/tool-modules.ts. */
@Module({ providers: [TextToolsService] })
export class TextToolsModule {}
