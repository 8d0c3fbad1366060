import type { IncomingMessage } from 'node:http';

/** Raised for a body the fast path read but could not use; `type` is body-parser's name for the same case. */
export class JsonBodyError extends Error {
  constructor(
    message: string,
    readonly type: 'entity.parse.failed' | 'request.aborted',
  ) {
    super(message);
  }
}

const CONTENT_LENGTH = /^[0-9]{1,15}$/;

/**
 * Whether `readJsonBody` can take this request. It takes only the case every MCP client sends: exactly
 * `Content-Type: application/json`, no `Content-Encoding`, no `Transfer-Encoding` and a non-zero
 * `Content-Length` within `limit`. Everything else (charsets, compressed or chunked bodies, an empty or
 * oversized body, a request whose body is already gone) goes to body-parser, which refuses or reads it.
 */
export function takesJsonBody(req: IncomingMessage, limit: number): boolean {
  const h = req.headers;
  if (h['content-type'] !== 'application/json') return false;
  if (h['content-encoding'] !== undefined || h['transfer-encoding'] !== undefined) return false;
  const length = h['content-length'];
  if (length === undefined || !CONTENT_LENGTH.test(length)) return false;
  const bytes = Number(length);
  if (bytes === 0 || bytes > limit) return false;
  // body-parser's own "already read" test (on-finished): such a request is left to it.
  const socket = req.socket;
  if (!socket || !socket.readable || (req.complete && !req.readable)) return false;
  return true;
}

/**
 * Reads and parses a JSON body that `takesJsonBody` accepted, the way `express.json({ strict: false,
 * verify })` does: `verify` sees the raw bytes first (its error is passed on as it is), the bytes are decoded
 * as UTF-8 with a leading byte order mark dropped, an empty text is `{}` and anything else goes to
 * `JSON.parse`. It exists because body-parser spends its time on what this case does not need (content-type
 * parsing, charset lookup, a decoder stream, raw-body's bookkeeping): a few percent of a request's CPU.
 */
export function readJsonBody(
  req: IncomingMessage & { body?: unknown },
  verify: (buf: Buffer) => void,
  done: (err?: unknown) => void,
): void {
  if (!('body' in req)) req.body = undefined;
  const chunks: Buffer[] = [];
  let settled = false;
  const cleanup = (): void => {
    req.off('data', onData);
    req.off('end', onEnd);
    req.off('aborted', onAborted);
    req.off('error', onError);
  };
  const settle = (err?: unknown): void => {
    if (settled) return;
    settled = true;
    cleanup();
    done(err);
  };
  const onData = (chunk: Buffer): void => {
    chunks.push(chunk);
  };
  const onAborted = (): void => settle(new JsonBodyError('request aborted', 'request.aborted'));
  const onError = (): void => settle(new JsonBodyError('request aborted', 'request.aborted'));
  const onEnd = (): void => {
    if (settled) return;
    const buf = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks);
    try {
      verify(buf);
    } catch (err) {
      settle(err);
      return;
    }
    let text = buf.toString('utf8');
    if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
    try {
      req.body = text.length === 0 ? {} : JSON.parse(text);
    } catch (err) {
      settle(new JsonBodyError(err instanceof Error ? err.message : 'malformed JSON', 'entity.parse.failed'));
      return;
    }
    settle();
  };
  req.on('data', onData);
  req.on('end', onEnd);
  req.on('aborted', onAborted);
  req.on('error', onError);
}
