import { Global, Module } from '@nestjs/common';
import { ConnectionTracker } from './connection-tracker.service.js';
import { LifecycleService } from './lifecycle.service.js';

@Global()
@Module({ providers: [LifecycleService, ConnectionTracker], exports: [LifecycleService, ConnectionTracker] })
export class LifecycleModule {}
