import { Global, Module } from '@nestjs/common';
import { InstancesModule } from '../instances/instances.module.js';
import { PgBusService } from './pg-bus.service.js';

@Global()
@Module({ imports: [InstancesModule], providers: [PgBusService], exports: [PgBusService] })
export class BusModule {}
