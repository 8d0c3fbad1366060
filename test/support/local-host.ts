import { existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { delimiter, join } from 'node:path';

/** A TCP port on loopback that nothing listens on right now (the OS picks it; the caller binds it next). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => resolve(typeof addr === 'object' && addr ? addr.port : 0));
    });
  });
}

/**
 * A daemon binary from a Debian package: on PATH, or where Debian puts it (/usr/sbin is not on every user's
 * PATH). Missing, it throws naming the package, so a suite that needs it fails loudly instead of skipping.
 */
export function findSbinBinary(name: string): string {
  const dirs = [...(process.env.PATH ?? '').split(delimiter), '/usr/sbin', '/usr/local/sbin'];
  for (const d of dirs) {
    if (d && existsSync(join(d, name))) return join(d, name);
  }
  throw new Error(`${name} is not installed (Debian package ${name}; .ci/run installs it)`);
}
