import type { INestApplication, LoggerService } from '@nestjs/common';
import type { Server } from 'node:http';
import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { ConnectionTracker } from './connection-tracker.service.js';
import { LifecycleConfig } from './lifecycle.config.js';
import { LifecycleService } from './lifecycle.service.js';
import { errorMessage } from '../common/error-message.js';

/**
 * Closes the listener, and only the listener, without resetting connections the kernel has already
 * completed. Those wait in the listen backlog until a poll phase of the event loop accepts them, and closing
 * the listener first resets them: the client has sent its request by then, and nginx answers a POST that
 * was sent with a 502 instead of retrying it (seen in the rolling-restart chaos scenario whenever the loop
 * was busy at the close). Two setImmediate turns guarantee one poll phase between the caller and the close,
 * wherever it is called from; what is accepted there is served (see configureApp). Only a connection
 * completed in the microseconds between that poll phase and the close can still be reset. `http.Server`'s
 * own close() would also end every idle kept-alive connection at once, racing a balancer's next request on
 * it: those are ConnectionTracker's to end.
 */
export async function stopListening(server: Server): Promise<void> {
  await new Promise((r) => setImmediate(r));
  await new Promise((r) => setImmediate(r));
  net.Server.prototype.close.call(server);
}

/**
 * SIGTERM/SIGINT: turn readiness to 503 at once but keep serving for SHUTDOWN_DRAIN_DELAY_MS (each answer
 * closes its connection), so a balancer stops sending before anything is refused: Kubernetes removes the
 * endpoint, and nginx, which does not probe readiness, loses every upstream connection to this instance
 * (closed after an answer, or by its own upstream keepalive_timeout, shorter than the delay). Then stop
 * listening: a connection attempt is refused, which nginx retries on another instance even for a POST, since
 * nothing was sent. Streams and tasks/result waits end, and in-flight requests get up to SHUTDOWN_GRACE_MS.
 * A connection an answer left open (its headers went out before the announce) is closed by the balancer
 * within its idle timeout, or by this side after SHUTDOWN_DRAIN_DELAY_MS idle; a request sent on it meanwhile
 * is served. Then what is left is cut, the app closes (HTTP server, database pool) and `afterClose` runs
 * (stopping the embedded PostgreSQL, which must outlive the pool).
 */
export function installGracefulShutdown(
  app: INestApplication,
  logger: LoggerService,
  afterClose: () => Promise<void>,
): void {
  const lifecycle = app.get(LifecycleService);
  const { SHUTDOWN_GRACE_MS, SHUTDOWN_DRAIN_DELAY_MS } = app.get(LifecycleConfig);
  const server = app.getHttpServer() as Server;
  const connections = app.get(ConnectionTracker);
  let started = false;

  const run = async (signal: string): Promise<void> => {
    logger.log(
      `${signal} received: not ready, serving for ${SHUTDOWN_DRAIN_DELAY_MS} ms more, then draining (grace ${SHUTDOWN_GRACE_MS} ms)`,
      'Shutdown',
    );
    lifecycle.announceDrain();
    if (SHUTDOWN_DRAIN_DELAY_MS > 0) await sleep(SHUTDOWN_DRAIN_DELAY_MS);
    // Stops accepting connections; answers in flight still go out, and kept connections are ended once idle
    // for the drain delay (or closed by the balancer before that).
    await stopListening(server);
    lifecycle.beginDrain();
    connections.closeIdleConnections();
    const graceEnds = Date.now() + SHUTDOWN_GRACE_MS;
    const idle = await lifecycle.waitForIdle(SHUTDOWN_GRACE_MS);
    if (!idle) {
      logger.warn(
        `${lifecycle.inFlightRequests} request(s) still running after the grace period; closing them`,
        'Shutdown',
      );
    } else {
      // The last answers may have left connections open: the balancer may still send one request on each,
      // served like any in-flight request within the grace.
      await connections.allClosed(Math.max(0, graceEnds - Date.now()) + SHUTDOWN_DRAIN_DELAY_MS);
    }
    server.closeAllConnections();
    await app.close();
    await afterClose();
    logger.log('stopped', 'Shutdown');
  };

  const onSignal = (signal: NodeJS.Signals): void => {
    if (started) return;
    started = true;
    run(signal).then(
      () => process.exit(0),
      (err: unknown) => {
        logger.error(`shutdown failed: ${errorMessage(err)}`, undefined, 'Shutdown');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
}
