import type { WireRefusal } from '../../common/error-mappers.js';
import { JSONRPC } from '../../common/json-rpc-codes.js';
import { TaskErrorCode, type TaskError } from '../tasks.errors.js';

/** Task registry refusals, the same in both eras. A foreign task and a missing one get the very same answer. */
export function mapTaskError(err: TaskError): WireRefusal {
  switch (err.code) {
    case TaskErrorCode.TASK_NOT_FOUND:
      return { code: JSONRPC.INVALID_PARAMS, message: 'Task not found' };
    case TaskErrorCode.TASK_TERMINAL:
    case TaskErrorCode.INVALID_CURSOR:
    case TaskErrorCode.INVALID_ARGUMENT:
      return { code: JSONRPC.INVALID_PARAMS, message: err.message };
    case TaskErrorCode.IDEMPOTENCY_CONFLICT:
      return {
        code: JSONRPC.INVALID_PARAMS,
        message: err.message,
        data: { idempotencyKey: err.idempotencyKey },
      };
    case TaskErrorCode.LIMIT_EXCEEDED:
    case TaskErrorCode.TASK_BUSY:
      return { code: JSONRPC.SERVER_ERROR, message: err.message };
  }
}
