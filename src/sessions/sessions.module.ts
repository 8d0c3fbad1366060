import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { InstancesModule } from '../instances/instances.module.js';
import { ClientResponse } from './client-response.entity.js';
import { ClientResponsesRepository } from './client-responses.repository.js';
import { McpSession } from './session.entity.js';
import { SessionsRepository } from './sessions.repository.js';
import { SessionsService } from './sessions.service.js';
import { SseEvent } from './sse-event.entity.js';
import { SseEventsRepository } from './sse-events.repository.js';
import { SseStream } from './sse-stream.entity.js';

@Module({
  imports: [InstancesModule, TypeOrmModule.forFeature([McpSession, SseEvent, SseStream, ClientResponse])],
  providers: [SessionsRepository, SseEventsRepository, ClientResponsesRepository, SessionsService],
  exports: [SessionsService, SseEventsRepository, ClientResponsesRepository],
})
export class SessionsModule {}
