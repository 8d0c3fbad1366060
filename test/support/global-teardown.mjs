import { rmSync } from 'node:fs';

export default async function globalTeardown() {
  if (globalThis.__embeddedTestPg) {
    await globalThis.__embeddedTestPg.stop();
    rmSync(globalThis.__embeddedTestDir, { recursive: true, force: true });
  }
}
