import { AsyncLocalStorage } from 'node:async_hooks';

export interface RequestContext {
  requestId: string;
  /** Set once authentication resolved who is calling. */
  principalId?: string;
}

/** Carries the correlation id through everything a request causes, so every log line can name it. */
export const requestContext = new AsyncLocalStorage<RequestContext>();

export function currentRequestId(): string | undefined {
  return requestContext.getStore()?.requestId;
}

/** Records the authenticated principal on the current request's context (no-op outside a request). */
export function setRequestPrincipal(principalId: string): void {
  const store = requestContext.getStore();
  if (store) store.principalId = principalId;
}
