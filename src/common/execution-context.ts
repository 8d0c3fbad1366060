import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * One AsyncLocalStorage for everything that follows the code running now through its async continuations:
 * the request (logging), the MCP operation (telemetry), who acts and the pinned audit context (audit).
 *
 * Why one: on Node 20 every enabled AsyncLocalStorage adds work to every promise the process creates (its
 * init hook copies the store onto each new promise, one property per storage). Four storages made a promise
 * cost about five times what it costs with none in a micro-benchmark, and the allocation profile of a task
 * lifecycle put the promise hooks first (8-11 % of all bytes allocated). With one storage each of them is a
 * slot here: setting one copies the others (a small object per `run`, which happens per request or per
 * unit of work, not per promise).
 */
const storage = new AsyncLocalStorage<Readonly<Record<symbol, unknown>>>();

export interface ContextSlot<T> {
  /** Runs `fn` with this slot set to `value` (undefined clears it); the other slots stay as they are. */
  run<R>(value: T | undefined, fn: () => R): R;
  /** The slot's value in the code running now. */
  get(): T | undefined;
}

/** A slot of the shared execution context (see above); `name` only labels its key. */
export function contextSlot<T>(name: string): ContextSlot<T> {
  const key = Symbol(name);
  return {
    run: (value, fn) => storage.run({ ...storage.getStore(), [key]: value }, fn),
    get: () => storage.getStore()?.[key] as T | undefined,
  };
}
