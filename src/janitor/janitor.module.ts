import { Module } from '@nestjs/common';
import { InstancesModule } from '../instances/instances.module.js';
import { TasksModule } from '../tasks/tasks.module.js';
import { JanitorService } from './janitor.service.js';

@Module({ imports: [InstancesModule, TasksModule], providers: [JanitorService], exports: [JanitorService] })
export class JanitorModule {}
