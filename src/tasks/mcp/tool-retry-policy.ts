import { Logger } from '@nestjs/common';
import { errorMessage } from '../../common/error-message.js';
import { correlationId, internalErrorText, isInfrastructureFault } from '../../common/internal-fault.js';
import { CheckpointError } from '../../tool-dispatch/checkpoint.js';
import type { ToolDescriptor } from '../../tool-dispatch/tool-dispatch.types.js';
import { RetryableFailure } from '../execution/task-retry.js';

const logger = new Logger('TaskRetry');

/**
 * The default `retryOn`: every handler error is worth another run except a refused checkpoint (the same
 * state would be refused again). A McpProtocolError, the server's control signals and anything thrown after
 * the run was aborted never get here: the registry lets them through untouched (ToolRegistry.callTool).
 */
function retriedByDefault(err: unknown): boolean {
  return !(err instanceof CheckpointError);
}

/**
 * For a run of `tool` (a task run, or a modern call's inline window), the ToolRegistry `rethrow` hook that
 * turns a handler error the tool's retry policy retries into a RetryableFailure, which the task runner
 * re-queues instead of recording a tool error result. Undefined when the tool has no policy that allows a
 * second run: its errors stay tool error results.
 */
export function retryRethrow(
  tool: ToolDescriptor | undefined,
): ((err: unknown) => Error | undefined) | undefined {
  const retry = tool?.durability.retry;
  if (!tool || !retry || retry.maxAttempts <= 1) return undefined;
  const backoff = {
    initialDelayMs: retry.initialDelayMs,
    factor: retry.factor,
    maxDelayMs: retry.maxDelayMs,
  };
  return (err) => {
    let retried: boolean;
    try {
      retried = (retry.retryOn ?? retriedByDefault)(err);
    } catch (thrown) {
      // A policy that cannot decide does not retry: the error is reported as it would be without one.
      logger.warn(`retryOn of tool ${tool.name} threw (${errorMessage(thrown)}); not retrying`);
      return undefined;
    }
    if (!retried) return undefined;
    if (isInfrastructureFault(err)) {
      // Database and driver text names tables and hosts: the task keeps an id to quote, the log the rest.
      const id = correlationId();
      logger.error(`Tool ${tool.name} failed on infrastructure [${id}]: ${errorMessage(err)}`);
      return new RetryableFailure({ code: -32603, message: internalErrorText(id) }, backoff);
    }
    const message = errorMessage(err) || `Tool ${tool.name} failed`;
    logger.warn(`Tool ${tool.name} failed (retried by its policy): ${message}`);
    return new RetryableFailure({ code: -32603, message }, backoff);
  };
}
