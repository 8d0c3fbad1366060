import { LOCAL_INPUT_KEY, type InputRequest, type TaskSnapshot } from '../task.types.js';

export interface InputLimits {
  maxRounds: number;
  maxKeys: number;
  maxStateBytes: number;
}

/** The first input limit a round breaks, as the message the failed task will carry; null when it is fine. */
export function checkInputRound(
  current: Pick<TaskSnapshot, 'inputRounds'>,
  requests: Record<string, InputRequest>,
  handlerState: unknown,
  limits: InputLimits,
): string | null {
  const keys = Object.keys(requests ?? {});
  if (keys.length === 0) return 'Invalid input round: no input requests';
  for (const k of keys) {
    if (!LOCAL_INPUT_KEY.test(k))
      return `Invalid input round: bad request key ${JSON.stringify(k.slice(0, 80))}`;
    const req = requests[k];
    if (!req || typeof req.method !== 'string' || req.method.length === 0) {
      return `Invalid input round: request ${k} has no method`;
    }
  }
  if (current.inputRounds + 1 > limits.maxRounds) {
    return `Input limit exceeded: more than TASK_MAX_INPUT_ROUNDS (${limits.maxRounds}) input rounds`;
  }
  if (keys.length > limits.maxKeys) {
    return `Input limit exceeded: ${keys.length} input requests in one round, over TASK_MAX_INPUT_KEYS (${limits.maxKeys})`;
  }
  const stateBytes =
    handlerState === undefined || handlerState === null ? 0 : Buffer.byteLength(JSON.stringify(handlerState));
  if (stateBytes > limits.maxStateBytes) {
    return `Input limit exceeded: handler state of ${stateBytes} bytes, over TASK_MAX_HANDLER_STATE_BYTES (${limits.maxStateBytes})`;
  }
  return null;
}
