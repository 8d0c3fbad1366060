// Peer for bench/compare.mjs: @rekog/mcp-nest 2.x (on the official SDK 2.x) serving the echo tool stateless,
// in both protocol eras (its 'dual' posture), the way its README sets it up. Plain JavaScript, so the
// decorators are applied with Reflect.decorate instead of the @ syntax.
//
//   node bench/peers/mcp-nest-server.mjs   (prints "listening on http://127.0.0.1:PORT/mcp")
import 'reflect-metadata';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Payload } from '@nestjs/microservices';
import { McpController, McpStrategy, StreamableHttpTransport, Tool } from '@rekog/mcp-nest';
import { z } from 'zod';

class EchoController {
  echo({ text }) {
    return { content: [{ type: 'text', text }] };
  }
}
Reflect.decorate(
  [Tool({ name: 'echo', description: 'echo', parameters: z.object({ text: z.string() }) })],
  EchoController.prototype,
  'echo',
  Object.getOwnPropertyDescriptor(EchoController.prototype, 'echo'),
);
Payload()(EchoController.prototype, 'echo', 0);
Reflect.decorate([McpController()], EchoController);

const mcp = new McpStrategy({
  name: 'mcp-nest-peer',
  version: '1.0.0',
  transports: [new StreamableHttpTransport({ statefulMode: false, enableJsonResponse: true })],
});

class PeerModule {}
Reflect.decorate([Module({ controllers: [EchoController] })], PeerModule);

const app = await NestFactory.create(PeerModule, { logger: ['error'] });
mcp.setHttpAdapter(app.getHttpAdapter());
app.connectMicroservice({ strategy: mcp });
await app.startAllMicroservices();
await app.listen(0, '127.0.0.1');
console.log(`listening on http://127.0.0.1:${app.getHttpServer().address().port}/mcp`);
process.on('SIGTERM', () => void app.close().then(() => process.exit(0)));
