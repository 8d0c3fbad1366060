import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { SESSION_ACK_CHANNEL, SESSION_CHANNEL } from './sessions.service.js';

/**
 * For a process without the bus (the admin CLI): tells every running instance that a session ended, the
 * way SessionsService.end does, and waits until each of `instanceIds` acknowledged dropping it from memory
 * or `timeoutMs` passed. Returns the instances that did not answer in time.
 */
export async function announceSessionEnd(
  connectionString: string,
  sessionId: string,
  instanceIds: readonly string[],
  timeoutMs: number,
): Promise<string[]> {
  const waiting = new Set(instanceIds);
  const client = new pg.Client({ connectionString, application_name: 'mcp-admin-cli' });
  await client.connect();
  try {
    const nonce = randomUUID();
    const done = new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, timeoutMs);
      client.on('notification', (n) => {
        if (n.channel !== SESSION_ACK_CHANNEL || !n.payload) return;
        try {
          const p = JSON.parse(n.payload) as { a?: unknown; _from?: unknown };
          if (p.a === nonce && typeof p._from === 'string') waiting.delete(p._from);
        } catch {
          return;
        }
        if (waiting.size === 0) {
          clearTimeout(timer);
          resolve();
        }
      });
      if (waiting.size === 0) {
        clearTimeout(timer);
        resolve();
      }
    });
    await client.query(`LISTEN ${SESSION_ACK_CHANNEL}`);
    await client.query('SELECT pg_notify($1, $2)', [
      SESSION_CHANNEL,
      JSON.stringify({ s: sessionId, a: nonce, _from: 'admin-cli' }),
    ]);
    await done;
    return [...waiting];
  } finally {
    await client.end().catch(() => undefined);
  }
}
