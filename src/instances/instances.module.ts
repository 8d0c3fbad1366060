import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { InstancesRepository } from './instances.repository.js';
import { InstancesService } from './instances.service.js';
import { ServiceInstance } from './service-instance.entity.js';

@Module({
  imports: [TypeOrmModule.forFeature([ServiceInstance])],
  providers: [InstancesRepository, InstancesService],
  exports: [InstancesService],
})
export class InstancesModule {}
