import { contextSlot } from '../common/execution-context.js';

export interface RequestContext {
  requestId: string;
  /** Set once authentication resolved who is calling. */
  principalId?: string;
}

const slot = contextSlot<RequestContext>('request');

/**
 * Carries the correlation id through everything a request causes, so every log line can name it. A slot of
 * the shared execution context (common/execution-context.ts), with the AsyncLocalStorage calls it needs.
 */
export const requestContext = {
  run: <T>(ctx: RequestContext, fn: () => T): T => slot.run(ctx, fn),
  /** Runs `fn` outside any request (work a request only woke up, such as a claim). */
  exit: <T>(fn: () => T): T => slot.run(undefined, fn),
  getStore: (): RequestContext | undefined => slot.get(),
};

export function currentRequestId(): string | undefined {
  return requestContext.getStore()?.requestId;
}

/** Records the authenticated principal on the current request's context (no-op outside a request). */
export function setRequestPrincipal(principalId: string): void {
  const store = requestContext.getStore();
  if (store) store.principalId = principalId;
}
