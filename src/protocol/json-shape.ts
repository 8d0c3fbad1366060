import { JSONRPC, type JsonRpcId } from './json-rpc.js';

/** The shape every incoming JSON body must keep (ProtocolConfig JSON_MAX_DEPTH, JSON_MAX_OBJECT_KEYS, JSON_MAX_NODES). */
export interface JsonShapeLimits {
  maxDepth: number;
  maxObjectKeys: number;
  maxNodes: number;
}

export type JsonShapeLimit = 'depth' | 'object_keys' | 'nodes';

const SETTING: Record<JsonShapeLimit, string> = {
  depth: 'JSON_MAX_DEPTH',
  object_keys: 'JSON_MAX_OBJECT_KEYS',
  nodes: 'JSON_MAX_NODES',
};

const WHAT: Record<JsonShapeLimit, string> = {
  depth: 'nests objects and arrays deeper than',
  object_keys: 'has an object with more keys than',
  nodes: 'has more values in total than',
};

/**
 * A body that breaks a shape limit. What the scan could tell about the message's top level comes with it,
 * so the refusal can echo the request's id and a refused client response can fail the call waiting for it.
 */
export class JsonShapeError extends Error {
  /** body-parser passes a verify error's `type` through; app.setup.ts recognises the refusal by it. */
  readonly type = 'entity.shape.exceeded';
  get code(): number {
    return this.isObject ? JSONRPC.INVALID_PARAMS : JSONRPC.INVALID_REQUEST;
  }

  constructor(
    readonly limit: JsonShapeLimit,
    readonly max: number,
    readonly id: JsonRpcId | null,
    readonly isResponse: boolean,
    /** False for a batch or a primitive: no JSON-RPC message at all, so Invalid Request rather than params. */
    readonly isObject: boolean,
  ) {
    super(
      `${isObject ? 'Invalid params' : 'Invalid Request'}: the message ${WHAT[limit]} ${SETTING[limit]} = ${max} allows`,
    );
    this.name = 'JsonShapeError';
  }

  get setting(): string {
    return SETTING[this.limit];
  }
}

/**
 * The body as UTF-8 bytes for the scan. body-parser admits only utf-* charsets for JSON; the rare UTF-16 body
 * is decoded once (as the parser would), a charset this runtime cannot decode is refused like any other.
 */
export function utf8Bytes(buf: Buffer, encoding: string | null): Uint8Array {
  if (encoding === null || /^utf-?8$/i.test(encoding)) return buf;
  let text: string;
  try {
    text = new TextDecoder(encoding, { fatal: false }).decode(buf);
  } catch {
    throw Object.assign(new Error(`unsupported charset ${encoding}`), { type: 'charset.unsupported' });
  }
  return Buffer.from(text, 'utf8');
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COLON = 0x3a;
const COMMA = 0x2c;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const ID_SPAN_MAX = 300;

function isSpace(b: number): boolean {
  return b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09;
}

/**
 * Checks the shape of a JSON text before anything parses it: one pass over its bytes, no recursion, no
 * allocation per value. JSON.parse, class-transformer, the validators and JSON.stringify all cost more than
 * linear time on some shapes (a 300,000-key object takes V8 alone a quarter of a second to build) or recurse
 * per level, so the text is refused here, in time linear in its length, before any of them runs.
 *
 * The scan reads UTF-8 (every structural character is ASCII, and no byte of a multi-byte sequence is). It
 * trusts nothing it cannot check cheaply: text that is not JSON is left for JSON.parse to refuse. After a
 * limit is broken it goes on tracking only the top level, to find the message's id and kind.
 */
export function checkJsonShape(text: Uint8Array, limits: JsonShapeLimits): JsonShapeError | undefined {
  const { maxDepth, maxObjectKeys, maxNodes } = limits;
  // Per open container (up to maxDepth of them): whether it is an object, and how many keys it has so far.
  const isObject = new Uint8Array(maxDepth + 2);
  const keys = new Uint32Array(maxDepth + 2);
  let depth = 0;
  let nodes = 0;
  let broken: JsonShapeLimit | undefined;
  let inString = false;
  let escaped = false;
  /** A value may start at the next non-space byte (after the start, `[`, `,` in an array, or `:`). */
  let valueNext = true;
  /** The next string in the current object is a key (after `{` or `,`). */
  let keyNext = false;
  // The top level of the root object: which member a key string at depth 1 names, and the id's span.
  let topKeyStart = -1;
  let topKey = '';
  let idStart = -1;
  let idSpan: string | undefined;
  let isResponse = false;
  let hasMethod = false;
  let rootIsObject = false;

  for (let i = 0; i < text.length; i++) {
    // Refused already, and the top level has told what it can: the rest would change nothing.
    if (broken !== undefined && idSpan !== undefined && (hasMethod || isResponse)) break;
    const b = text[i];
    if (inString) {
      if (escaped) escaped = false;
      else if (b === BACKSLASH) escaped = true;
      else if (b === QUOTE) {
        inString = false;
        if (topKeyStart >= 0) {
          topKey = i - topKeyStart <= 8 ? Buffer.from(text.subarray(topKeyStart, i)).toString('latin1') : '';
          topKeyStart = -1;
        }
      }
      continue;
    }
    if (isSpace(b)) continue;
    if (valueNext) {
      valueNext = false;
      if (b !== CLOSE_ARRAY) {
        nodes++;
        if (nodes > maxNodes) broken ??= 'nodes';
      }
    }
    switch (b) {
      case QUOTE:
        inString = true;
        if (keyNext) {
          keyNext = false;
          if (depth === 1) topKeyStart = i + 1;
        }
        break;
      case OPEN_OBJECT:
      case OPEN_ARRAY:
        if (depth === 0 && nodes === 1) rootIsObject = b === OPEN_OBJECT;
        depth++;
        if (depth > maxDepth) broken ??= 'depth';
        if (depth <= maxDepth + 1) {
          isObject[depth] = b === OPEN_OBJECT ? 1 : 0;
          keys[depth] = 0;
        }
        if (b === OPEN_OBJECT) keyNext = true;
        else valueNext = true;
        break;
      case CLOSE_OBJECT:
      case CLOSE_ARRAY:
        if (depth === 1 && idStart >= 0) {
          idSpan = spanText(text, idStart, i);
          idStart = -1;
        }
        depth--;
        keyNext = false;
        break;
      case COLON:
        if (depth >= 1 && depth <= maxDepth + 1 && isObject[depth]) {
          keys[depth]++;
          if (keys[depth] > maxObjectKeys) broken ??= 'object_keys';
          if (depth === 1) {
            if (topKey === 'id') idStart = i + 1;
            else if (topKey === 'result' || topKey === 'error') isResponse = true;
            else if (topKey === 'method') hasMethod = true;
            topKey = '';
          }
        }
        valueNext = true;
        break;
      case COMMA:
        if (depth === 1 && idStart >= 0) {
          idSpan = spanText(text, idStart, i);
          idStart = -1;
        }
        if (depth >= 1 && depth <= maxDepth + 1 && isObject[depth]) keyNext = true;
        else valueNext = true;
        break;
      default:
        break;
    }
  }
  if (broken === undefined) return undefined;
  return new JsonShapeError(
    broken,
    limitOf(broken, limits),
    rootIsObject ? parseId(idSpan) : null,
    rootIsObject && isResponse && !hasMethod,
    rootIsObject,
  );
}

function limitOf(limit: JsonShapeLimit, limits: JsonShapeLimits): number {
  if (limit === 'depth') return limits.maxDepth;
  if (limit === 'object_keys') return limits.maxObjectKeys;
  return limits.maxNodes;
}

function spanText(text: Uint8Array, start: number, end: number): string | undefined {
  return end - start <= ID_SPAN_MAX ? Buffer.from(text.subarray(start, end)).toString('utf8') : undefined;
}

/** The id member's text, when it is a JSON-RPC id (a short string or a finite number). */
function parseId(span: string | undefined): JsonRpcId | null {
  if (span === undefined) return null;
  try {
    const id: unknown = JSON.parse(span);
    if (typeof id === 'string' && id.length <= 256) return id;
    if (typeof id === 'number' && Number.isFinite(id)) return id;
  } catch {
    // Not JSON: JSON.parse would have refused the whole body anyway.
  }
  return null;
}
