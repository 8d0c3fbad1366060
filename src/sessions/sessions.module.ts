import { Module, type OnModuleInit } from '@nestjs/common';
import { registerErrorMapper } from '../common/error-mappers.js';
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
import { mapSessionError } from './sessions.error-mapper.js';
import { SessionError } from './sessions.errors.js';

@Module({
  imports: [InstancesModule, TypeOrmModule.forFeature([McpSession, SseEvent, SseStream, ClientResponse])],
  providers: [SessionsRepository, SseEventsRepository, ClientResponsesRepository, SessionsService],
  exports: [SessionsService, SseEventsRepository, ClientResponsesRepository],
})
export class SessionsModule implements OnModuleInit {
  onModuleInit(): void {
    registerErrorMapper(SessionError, mapSessionError);
  }
}
