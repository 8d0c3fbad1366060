import { runCli } from './cli.js';
import { errorMessage } from '../common/error-message.js';

// A reader that goes away (`audit export | head`) ends the output, not the process with a stack trace.
process.stdout.on('error', (err: NodeJS.ErrnoException) => {
  if (err.code !== 'EPIPE') throw err;
  process.exit(process.exitCode ?? 0);
});

runCli(process.argv.slice(2), process.env, {
  out: (line) => process.stdout.write(`${line}\n`),
  err: (line) => process.stderr.write(`${line}\n`),
  drain: () =>
    process.stdout.writableNeedDrain
      ? new Promise((resolve) => process.stdout.once('drain', resolve))
      : Promise.resolve(),
}).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(`fatal: ${errorMessage(err)}\n`);
    process.exitCode = 1;
  },
);
