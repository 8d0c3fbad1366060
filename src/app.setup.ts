import type { INestApplication, LoggerService } from '@nestjs/common';
import { Logger } from '@nestjs/common';
import express, { type NextFunction, type Request, type Response } from 'express';
import { randomUUID } from 'node:crypto';
import type { Server } from 'node:http';
import { ServerConfig } from './config/server.config.js';
import { ProtocolConfig } from './protocol/protocol.config.js';
import { ConnectionTracker } from './lifecycle/connection-tracker.service.js';
import { LifecycleService } from './lifecycle/lifecycle.service.js';
import { InstancesConfig } from './instances/instances.config.js';
import { requestContext } from './logging/request-context.js';
import { MetricsService } from './metrics/metrics.service.js';
import { mapQuotaError } from './quotas/quota.error-mapper.js';
import { QuotaExceededError } from './quotas/quota.errors.js';
import { QuotaService } from './quotas/quota.service.js';
import { checkJsonShape, JsonShapeError, utf8Bytes } from './protocol/json-shape.js';

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * Whether the router may hand this request to the /mcp routes. Express matches routes case-insensitively and
 * ignores a trailing slash (the defaults Nest keeps), so `/MCP` and `/Mcp/` reach the controller too: every
 * middleware keyed on the path must see them as /mcp, or a change of case skips it. The router matches the
 * undecoded path, as `req.path` is, so `/%6Dcp` is no route and needs no match here.
 */
export function isMcpPath(req: Pick<Request, 'path'>): boolean {
  const path = req.path.toLowerCase();
  return path === '/mcp' || path.startsWith('/mcp/');
}

/** Errors that happen before any route runs still answer in the dialect the client speaks. */
function sendEdgeError(
  req: Request,
  res: Response,
  status: number,
  jsonRpcCode: number,
  message: string,
): void {
  if (isMcpPath(req)) {
    res.status(status).json({ jsonrpc: '2.0', id: null, error: { code: jsonRpcCode, message } });
  } else {
    res.status(status).json({ statusCode: status, message });
  }
}

/**
 * Once a drain is announced, a connection carries no further request: an answer whose headers are still to
 * go says `Connection: close` (nginx then never reuses the connection). An answer whose headers went out
 * before the announce (a stream ended at the announce, a call answered over SSE) cannot say so; its connection
 * stays open until the balancer closes it or it has been idle for the drain delay (ConnectionTracker), and a
 * request the balancer sends on it meanwhile is served, with `Connection: close`.
 */
function closeAfterAnswerOnceAnnounced(lifecycle: LifecycleService, res: Response): void {
  const writeHead = res.writeHead.bind(res) as (...args: unknown[]) => Response;
  res.writeHead = ((...args: unknown[]): Response => {
    if (lifecycle.drainAnnounced && !res.headersSent) res.setHeader('Connection', 'close');
    return writeHead(...args);
  }) as Response['writeHead'];
}

/**
 * The HTTP pipeline shared by main.ts and the e2e tests, so tests exercise exactly what production runs:
 * correlation ids, request accounting for graceful drain, metrics, body limits and JSON error bodies.
 * The app must be created with `bodyParser: false`.
 */
export function configureApp(app: INestApplication): void {
  const config = app.get(ServerConfig);
  const protocolConfig = app.get(ProtocolConfig);
  const lifecycle = app.get(LifecycleService);
  const metrics = app.get(MetricsService);
  const quotas = app.get(QuotaService);
  const instances = app.get(InstancesConfig);
  const access = new Logger('HTTP');
  // The access line is a debug line, off at the default level: building its text and entering the request
  // context for it on every request cost about 1 % of a cached tasks/get. The logger in use says whether
  // the line would be written (ours and Nest's console logger know their level; any other logger is asked).
  const accessLogged = (): boolean => {
    const logger = access.localInstance as
      (LoggerService & { isLevelEnabled?: (level: 'debug') => boolean }) | undefined;
    return logger?.isLevelEnabled ? logger.isLevelEnabled('debug') : Logger.isLevelEnabled('debug');
  };

  const server = app.getHttpAdapter().getInstance() as express.Express;
  server.disable('x-powered-by');
  // Express would hash every response body for an ETag: JSON-RPC answers to POSTs are never revalidated, and
  // nothing else served here is worth a conditional GET, so that hash is pure cost.
  server.set('etag', false);
  server.set('trust proxy', false);

  // Graceful shutdown stops listening just before the drain begins, so a connection accepted in that last
  // moment (nginx opens one per request while this instance answers `Connection: close`) may bring its
  // request after the drain began, and a connection whose last answer kept it open may bring one until the
  // balancer's idle timeout closes it. Either was sent while the balancer had every reason to, and nginx
  // does not retry a POST it has sent: such a request is served. Only a connection accepted once the drain
  // began (none, outside tests: the listener is closed by then) is refused.
  const connections = app.get(ConnectionTracker);
  connections.attach(app.getHttpServer() as Server);

  app.use((req: Request, res: Response, next: NextFunction) => {
    const admitted = connections.requestStarted(req.socket);
    const incoming = req.header('x-request-id');
    const requestId = incoming && REQUEST_ID.test(incoming) ? incoming : randomUUID();
    res.setHeader('x-request-id', requestId);
    // One context object for the request: the auth guard adds the principal to it, the access line reads it.
    const ctx = { requestId };
    const started = process.hrtime.bigint();
    lifecycle.requestStarted();
    let done = false;
    const finish = (): void => {
      if (done) return;
      done = true;
      connections.answered(req.socket);
      lifecycle.requestFinished();
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      const route = (req.route as { path?: string } | undefined)?.path;
      metrics.observeHttp(req.method, route ?? 'unmatched', res.statusCode, seconds);
      if (!accessLogged()) return;
      requestContext.run(ctx, () =>
        access.debug(`${req.method} ${route ?? req.path} ${res.statusCode} ${(seconds * 1000).toFixed(1)}ms`),
      );
    };
    res.once('finish', finish);
    res.once('close', finish);
    closeAfterAnswerOnceAnnounced(lifecycle, res);
    requestContext.run(ctx, () => {
      if (lifecycle.draining && isMcpPath(req) && !admitted) {
        res.setHeader('Connection', 'close');
        res.setHeader('Retry-After', '5');
        sendEdgeError(req, res, 503, -32000, 'Server is shutting down; retry on another instance');
        return;
      }
      // A worker runs queued task work and serves health and metrics only: every /mcp method (POST, GET,
      // DELETE) is refused before the body is read, so a balancer that reaches one by mistake gets a
      // clear, retryable answer and never a result.
      if (!instances.servesMcp && isMcpPath(req)) {
        sendEdgeError(
          req,
          res,
          503,
          -32000,
          'This instance runs task work only (INSTANCE_ROLE=worker) and serves no MCP requests; use a web instance',
        );
        return;
      }
      next();
    });
  });

  // The per-address rate runs before the body is parsed and before the auth guard, so a flood of bad tokens
  // or malformed API keys is refused without a database query. The address is the socket's (trust proxy is
  // off): behind a balancer every client shares it, so raise RATE_LIMIT_ADDRESS_RPS there or set it to 0.
  app.use((req: Request, res: Response, next: NextFunction) => {
    if (!isMcpPath(req)) return next();
    try {
      quotas.checkAddressRate(req.socket.remoteAddress ?? 'unknown');
    } catch (err) {
      if (!(err instanceof QuotaExceededError)) throw err;
      const { code, message, data } = mapQuotaError(err);
      res.setHeader('Retry-After', String(err.retryAfterSeconds ?? 1));
      res.status(429).json({
        jsonrpc: '2.0',
        id: null,
        error: { code, message, data },
      });
      return;
    }
    next();
  });

  const shapeLimits = {
    maxDepth: protocolConfig.JSON_MAX_DEPTH,
    maxObjectKeys: protocolConfig.JSON_MAX_OBJECT_KEYS,
    maxNodes: protocolConfig.JSON_MAX_NODES,
  };
  const json = express.json({
    limit: config.bodyLimitBytes,
    type: ['application/json', 'application/*+json'],
    // JSON-RPC must tell a primitive body (Invalid Request) from unparsable text (Parse error).
    strict: false,
    // Runs on the raw bytes before JSON.parse: a body too deep, too wide or too large in values is refused
    // before anything (the parser included) spends more than linear time on it.
    verify: (_req, res, buf, encoding) => {
      const bytes = utf8Bytes(buf, encoding);
      const refusal = checkJsonShape(bytes, shapeLimits);
      if (refusal) throw refusal;
      // Text PostgreSQL cannot store (a NUL, a lone surrogate) can only come from a \u escape: JSON
      // forbids a raw NUL in a string, and UTF-8 cannot encode a surrogate. Without one, the /mcp
      // controller skips its walk of the parsed body (unstorableText).
      (res as Response).locals.jsonUnicodeEscapes = Buffer.from(
        bytes.buffer,
        bytes.byteOffset,
        bytes.byteLength,
      ).includes('\\u');
    },
  });
  app.use((req: Request, res: Response, next: NextFunction) => {
    json(req, res, (err?: unknown) => {
      if (!err) return next();
      if (err instanceof JsonShapeError) {
        // /mcp answers it in its own dialect, with the request's id (and fails a call waiting for a refused
        // client response); anywhere else it is a plain 400.
        if (!isMcpPath(req)) return sendEdgeError(req, res, 400, err.code, err.message);
        req.body = undefined;
        res.locals.jsonShapeRefusal = err;
        return next();
      }
      const type = (err as { type?: string }).type;
      if (type === 'entity.too.large') {
        return sendEdgeError(
          req,
          res,
          413,
          -32600,
          `Request body exceeds the ${config.HTTP_BODY_LIMIT} limit`,
        );
      }
      if (type === 'entity.parse.failed')
        return sendEdgeError(req, res, 400, -32700, 'Parse error: malformed JSON');
      if (type === 'encoding.unsupported' || type === 'charset.unsupported') {
        return sendEdgeError(req, res, 415, -32600, 'Unsupported content encoding or charset');
      }
      return sendEdgeError(req, res, 400, -32600, 'Unreadable request body');
    });
  });

  if (config.CORS_ORIGINS.length > 0) {
    app.enableCors({
      origin: config.CORS_ORIGINS,
      exposedHeaders: ['Mcp-Session-Id', 'x-request-id', 'WWW-Authenticate'],
    });
  }
}
