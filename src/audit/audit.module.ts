import { Global, Module } from '@nestjs/common';
import { InstancesModule } from '../instances/instances.module.js';
import { AuditRepository } from './audit.repository.js';
import { AuditTrail } from './audit-trail.service.js';

/**
 * The audit trail. Global, because every feature that changes something writes it (tasks, sessions,
 * principals, the janitor, the console and the CLI) and none of them should have to import the others.
 */
@Global()
@Module({
  imports: [InstancesModule],
  providers: [AuditTrail, AuditRepository],
  exports: [AuditTrail, AuditRepository],
})
export class AuditModule {}
