// Writes docs/configuration.md from the config classes (run through `npm run docs:config`, which builds
// first); `--check` writes nothing and exits 1 when the committed page differs from what the classes say.
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import '../dist/src/app.config.js';
import { renderConfigDocs } from '../dist/src/config/config-docs.js';

const target = join(dirname(fileURLToPath(import.meta.url)), '..', 'docs', 'configuration.md');
const rendered = renderConfigDocs();
if (process.argv.includes('--check')) {
  let committed = '';
  try {
    committed = readFileSync(target, 'utf8');
  } catch {
    // a missing page is stale too
  }
  if (committed !== rendered) {
    console.error('docs/configuration.md is stale: run `npm run docs:config` and commit the result.');
    process.exit(1);
  }
  console.log('docs/configuration.md matches the config classes.');
} else {
  writeFileSync(target, rendered);
  console.log('wrote docs/configuration.md');
}
