export default async function globalTeardown() {
  // Stops the embedded PostgreSQL global-setup started, and deletes its temporary folder.
  if (globalThis.__embeddedTestPg) await globalThis.__embeddedTestPg.stop();
}
