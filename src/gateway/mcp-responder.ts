import { Injectable, Logger } from '@nestjs/common';
import { mapError } from '../protocol/error-mapping.js';
import { errorResponse, resultResponse, type JsonRpcId } from '../protocol/json-rpc.js';
import type { Era } from '../protocol/request-context.js';
import { currentOperation } from '../telemetry/mcp-operation.js';
import type { ResponseChannel } from './response-channel.js';
import { errorMessage } from '../common/error-message.js';

/**
 * Runs one request handler and sends its outcome on the channel: the result, or the error mapped once
 * (error-mapping.ts). An error mapped to an HTTP status other than 200 is only honoured while the answer
 * is still a plain JSON body.
 */
@Injectable()
export class McpResponder {
  private readonly logger = new Logger('McpRequest');

  async run(
    era: Era,
    id: JsonRpcId,
    channel: ResponseChannel,
    work: () => Promise<Record<string, unknown>>,
    decorate: (result: Record<string, unknown>) => Record<string, unknown> = (r) => r,
    signal?: AbortSignal,
  ): Promise<void> {
    let outcome;
    try {
      outcome = { ok: true as const, result: decorate(await work()) };
    } catch (err) {
      // A cancelled request gets no response (the client stopped waiting): just close what is open.
      if (signal?.aborted) {
        await channel.abandon();
        return;
      }
      outcome = { ok: false as const, mapped: mapError(err, era) };
    }
    if (outcome.ok) {
      if (outcome.result.isError === true) currentOperation()?.toolError();
    } else {
      currentOperation()?.failed(outcome.mapped.error.code, outcome.mapped.error.message);
    }
    try {
      if (outcome.ok) await channel.respond(resultResponse(id, outcome.result));
      else await channel.respond(errorResponse(id, outcome.mapped.error), outcome.mapped.httpStatus);
    } catch (err) {
      this.logger.warn(`could not deliver the response: ${errorMessage(err)}`);
      await this.answerUndeliverable(era, id, channel, err);
    }
  }

  /**
   * The answer itself could not be sent (it would not serialise, or its event could not be stored): the
   * client still gets one, the error that stopped it, and if even that fails the stream is ended, so that no
   * request is ever left open with nothing to come.
   */
  private async answerUndeliverable(
    era: Era,
    id: JsonRpcId,
    channel: ResponseChannel,
    cause: unknown,
  ): Promise<void> {
    const mapped = mapError(cause, era);
    try {
      await channel.respond(errorResponse(id, mapped.error), mapped.httpStatus);
    } catch (err) {
      this.logger.warn(`could not deliver the error either: ${errorMessage(err)}`);
      channel.end();
    }
  }
}
