import { Global, Module, type OnModuleInit } from '@nestjs/common';
import { registerErrorMapper } from '../common/error-mappers.js';
import { mapQuotaError } from './quota.error-mapper.js';
import { QuotaExceededError } from './quota.errors.js';
import { QuotaService } from './quota.service.js';

/** Global: the HTTP edge, the gateway, sessions and tasks all check quotas. */
@Global()
@Module({ providers: [QuotaService], exports: [QuotaService] })
export class QuotasModule implements OnModuleInit {
  onModuleInit(): void {
    registerErrorMapper(QuotaExceededError, mapQuotaError);
  }
}
