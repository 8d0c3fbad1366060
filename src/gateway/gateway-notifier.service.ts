import { Injectable } from '@nestjs/common';
import { SessionsService } from '../sessions/sessions.service.js';
import { McpNotifier } from '../tool-dispatch/mcp-notifier.js';
import { STANDALONE_STREAM, StreamHub } from './stream-hub.service.js';

/** McpNotifier over the session streams: logged, so a reconnecting GET with Last-Event-ID still gets them. */
@Injectable()
export class GatewayNotifier extends McpNotifier {
  constructor(
    private readonly sessions: SessionsService,
    private readonly hub: StreamHub,
  ) {
    super();
  }

  async resourceUpdated(uri: string): Promise<number> {
    const ids = await this.sessions.subscribedTo(uri);
    for (const id of ids) {
      await this.hub.publish(id, STANDALONE_STREAM, {
        jsonrpc: '2.0',
        method: 'notifications/resources/updated',
        params: { uri },
      });
    }
    return ids.length;
  }
}
