import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { digest } from './canonical-json.js';

/**
 * MRTR `requestState`: the answers gathered in earlier rounds, carried by the client between stateless
 * requests. The client controls it, so it is HMAC-protected and bound to the principal, the method, a digest
 * of the original params and an expiry; anything else is refused.
 */
export interface StatePayload {
  principalId: string;
  method: string;
  paramsDigest: string;
  expiresAt: number;
  answers: Record<string, unknown>;
}

export class RequestStateError extends Error {}

/** The params a retry must repeat unchanged: everything but the MRTR fields and the per-request envelope. */
export function paramsDigest(params: Record<string, unknown>): string {
  const { _meta: _m, inputResponses: _i, requestState: _r, ...rest } = params;
  return digest(rest);
}

export class RequestStateCodec {
  private readonly key: Buffer;

  constructor(secret: string | undefined) {
    this.key = secret ? Buffer.from(secret, 'utf8') : randomBytes(32);
  }

  encode(payload: StatePayload): string {
    const body = Buffer.from(JSON.stringify(payload)).toString('base64url');
    return `${body}.${this.mac(body)}`;
  }

  decode(
    token: unknown,
    expect: { principalId: string; method: string; paramsDigest: string },
  ): StatePayload {
    if (typeof token !== 'string' || token.length > 1_000_000)
      throw new RequestStateError('requestState is malformed');
    const dot = token.indexOf('.');
    if (dot <= 0) throw new RequestStateError('requestState is malformed');
    const body = token.slice(0, dot);
    const mac = Buffer.from(token.slice(dot + 1));
    const want = Buffer.from(this.mac(body));
    if (mac.length !== want.length || !timingSafeEqual(mac, want)) {
      throw new RequestStateError('requestState failed its integrity check');
    }
    let payload: StatePayload;
    try {
      payload = JSON.parse(Buffer.from(body, 'base64url').toString('utf8')) as StatePayload;
    } catch {
      throw new RequestStateError('requestState is malformed');
    }
    if (payload.expiresAt < Date.now()) throw new RequestStateError('requestState has expired');
    if (payload.principalId !== expect.principalId)
      throw new RequestStateError('requestState belongs to another caller');
    if (payload.method !== expect.method || payload.paramsDigest !== expect.paramsDigest) {
      throw new RequestStateError('requestState does not match this request');
    }
    return payload;
  }

  private mac(body: string): string {
    return createHmac('sha256', this.key).update(body).digest('base64url');
  }
}
