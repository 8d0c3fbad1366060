import { Module } from '@nestjs/common';
import { CustomerDirectoryClient } from './customer-directory.client.js';
import { CustomerLookupService } from './customer-lookup.service.js';

/** Example: an outbound HTTP call with timeouts, retries and a secret from config (docs/tool-authoring.md). */
@Module({ providers: [CustomerLookupService, CustomerDirectoryClient] })
export class CustomerLookupModule {}
