import { Module } from '@nestjs/common';
import { ErpClient } from './erp-client.js';
import { ErpExportService } from './erp-export.service.js';

/** Example: a tool whose downstream allows two calls at once, declared as cluster-wide limits (tool-authoring.md). */
@Module({ providers: [ErpExportService, ErpClient] })
export class ErpExportModule {}
