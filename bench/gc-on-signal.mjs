// Preloaded into the server by bench/soak.mjs (node --expose-gc --import): SIGUSR2 runs a full garbage
// collection, so heap figures taken right after compare live memory rather than collector timing.
process.on('SIGUSR2', () => {
  if (typeof globalThis.gc === 'function') globalThis.gc();
});
