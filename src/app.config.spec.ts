import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { configSections } from './config/config-section.js';
import { renderConfigDocs } from './config/config-docs.js';
import './app.config.js';

function configFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory()
      ? configFiles(join(dir, e.name))
      : e.name.endsWith('.config.ts') && !e.name.endsWith('.spec.ts')
        ? [join(dir, e.name)]
        : [],
  );
}

describe('app.config', () => {
  const src = join(process.cwd(), 'src');

  it('registers every *.config.ts under src/, so one load validates every module', () => {
    const text = readFileSync(join(src, 'app.config.ts'), 'utf8');
    const missing = configFiles(src)
      .map((f) => `./${relative(src, f).replace(/\.ts$/, '.js')}`)
      .filter((f) => f !== './app.config.js' && !text.includes(`import '${f}';`));
    expect(missing).toEqual([]);
    expect(configSections().length).toBe(configFiles(src).length - 1);
  });

  it('is what docs/configuration.md says (npm run docs:config rewrites it)', () => {
    expect(readFileSync(join(process.cwd(), 'docs', 'configuration.md'), 'utf8')).toBe(renderConfigDocs());
  });
});
