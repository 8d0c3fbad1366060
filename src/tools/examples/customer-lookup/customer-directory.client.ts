import { Injectable, Logger } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { ExamplesConfig } from '../examples.config.js';

/** A failure the model can read: the message says what went wrong and never contains the secret. */
export class CustomerDirectoryError extends Error {
  override name = 'CustomerDirectoryError';
}

type Attempt = { kind: 'answer'; status: number; body: string } | { kind: 'failure'; reason: string };

/**
 * The outbound side of the example: GET `<EXAMPLE_HTTP_BASE_URL>/customers/<id>` with the secret as a bearer
 * token. Each attempt has its own timeout (EXAMPLE_HTTP_TIMEOUT_MS) and is also aborted by the caller's
 * signal (a cancelled call stops waiting at once). 5xx answers, timeouts and network errors are retried
 * EXAMPLE_HTTP_RETRIES times with doubling backoff from EXAMPLE_HTTP_BACKOFF_MS; 4xx answers are not (asking
 * again would get the same refusal). The secret goes into the Authorization header and nowhere else: not in
 * logs, not in errors (an answer that echoes it is redacted).
 */
@Injectable()
export class CustomerDirectoryClient {
  private readonly logger = new Logger(CustomerDirectoryClient.name);

  constructor(private readonly config: ExamplesConfig) {}

  async getCustomer(
    customerId: string,
    signal: AbortSignal,
    onRetry: (message: string) => Promise<void> = async () => undefined,
  ): Promise<unknown> {
    const base = this.config.EXAMPLE_HTTP_BASE_URL;
    const secret = this.config.EXAMPLE_HTTP_SECRET;
    if (!base || !secret) {
      throw new CustomerDirectoryError(
        'The customer directory is not configured on this server (EXAMPLE_HTTP_BASE_URL and EXAMPLE_HTTP_SECRET).',
      );
    }
    const url = `${base.replace(/\/+$/, '')}/customers/${encodeURIComponent(customerId)}`;
    const attempts = this.config.EXAMPLE_HTTP_RETRIES + 1;
    let last = '';
    for (let attempt = 1; attempt <= attempts; attempt++) {
      const outcome = await this.attempt(url, secret, signal);
      if (outcome.kind === 'answer' && outcome.status < 500) return this.accept(outcome, customerId, secret);
      last = outcome.kind === 'answer' ? `HTTP ${outcome.status}` : outcome.reason;
      if (attempt === attempts) break;
      const delay = this.config.EXAMPLE_HTTP_BACKOFF_MS * 2 ** (attempt - 1);
      this.logger.warn(`customer directory attempt ${attempt} failed (${last}); retrying in ${delay} ms`);
      await onRetry(`attempt ${attempt} of ${attempts} failed (${last}), retrying in ${delay} ms`);
      await sleep(delay, undefined, { signal });
    }
    throw new CustomerDirectoryError(
      `The customer directory did not answer after ${attempts} attempt(s) (last: ${last}). Try again later.`,
    );
  }

  private async attempt(url: string, secret: string, signal: AbortSignal): Promise<Attempt> {
    const timeout = AbortSignal.timeout(this.config.EXAMPLE_HTTP_TIMEOUT_MS);
    try {
      const res = await fetch(url, {
        headers: { authorization: `Bearer ${secret}`, accept: 'application/json' },
        signal: AbortSignal.any([signal, timeout]),
        redirect: 'error',
      });
      return { kind: 'answer', status: res.status, body: await res.text() };
    } catch (err) {
      // The caller's cancellation is not a failure to retry: let it propagate as an abort.
      signal.throwIfAborted();
      if (timeout.aborted)
        return { kind: 'failure', reason: `timeout after ${this.config.EXAMPLE_HTTP_TIMEOUT_MS} ms` };
      const cause = (err as { cause?: { code?: string } }).cause?.code;
      return { kind: 'failure', reason: `network error${cause ? ` ${cause}` : ''}` };
    }
  }

  private accept(outcome: { status: number; body: string }, customerId: string, secret: string): unknown {
    if (outcome.status === 404) throw new CustomerDirectoryError(`No customer with id ${customerId}.`);
    if (outcome.status === 401 || outcome.status === 403) {
      throw new CustomerDirectoryError(
        `The customer directory refused this server's credentials (HTTP ${outcome.status}); an operator must check EXAMPLE_HTTP_SECRET.`,
      );
    }
    if (outcome.status >= 400) {
      const detail = outcome.body.split(secret).join('[redacted]').slice(0, 200);
      throw new CustomerDirectoryError(
        `The customer directory refused the request (HTTP ${outcome.status}): ${detail}`,
      );
    }
    try {
      return JSON.parse(outcome.body) as unknown;
    } catch {
      throw new CustomerDirectoryError('The customer directory answered something that is not JSON.');
    }
  }
}
