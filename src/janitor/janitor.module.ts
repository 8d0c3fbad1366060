import { Module } from '@nestjs/common';
import { InstancesModule } from '../instances/instances.module.js';
import { TasksModule } from '../tasks/tasks.module.js';
import { JanitorRepository } from './janitor.repository.js';
import { JanitorService } from './janitor.service.js';

@Module({
  imports: [InstancesModule, TasksModule],
  providers: [JanitorRepository, JanitorService],
  exports: [JanitorService],
})
export class JanitorModule {}
