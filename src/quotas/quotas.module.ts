import { Global, Module } from '@nestjs/common';
import { QuotaService } from './quota.service.js';

/** Global: the HTTP edge, the gateway, sessions and tasks all check quotas. */
@Global()
@Module({ providers: [QuotaService], exports: [QuotaService] })
export class QuotasModule {}
