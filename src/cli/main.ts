import { runCli } from './cli.js';
import { errorMessage } from '../common/error-message.js';

runCli(process.argv.slice(2), process.env, {
  out: (line) => process.stdout.write(`${line}\n`),
  err: (line) => process.stderr.write(`${line}\n`),
}).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(`fatal: ${errorMessage(err)}\n`);
    process.exitCode = 1;
  },
);
