import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** The link checker CI runs (`npm run docs:links`), a plain script without types. */
interface DocLinks {
  slug(heading: string): string;
  anchorsOf(markdown: string): Set<string>;
  linksOf(markdown: string): { target: string; line: number }[];
  checkPage(file: string, markdown: string, read: (path: string) => string): string[];
}

const SCRIPT = '../../scripts/check-doc-links.mjs';

describe('scripts/check-doc-links.mjs', () => {
  let links: DocLinks;
  let dir: string;

  beforeAll(async () => {
    links = (await import(SCRIPT)) as DocLinks;
    dir = mkdtempSync(join(tmpdir(), 'doc-links-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('makes the slugs GitHub makes', () => {
    expect(links.slug('Failure behaviour')).toBe('failure-behaviour');
    expect(links.slug('McpInstanceDown (critical)')).toBe('mcpinstancedown-critical');
    expect(links.slug('Tracing: turning it on')).toBe('tracing-turning-it-on');
    expect(links.slug('The context (`ctx`)')).toBe('the-context-ctx');
    expect(links.slug('Endpoints, logs and signals')).toBe('endpoints-logs-and-signals');
    expect(links.slug('A final write that cannot be made (lock timeout, reset connection, failover)')).toBe(
      'a-final-write-that-cannot-be-made-lock-timeout-reset-connection-failover',
    );
    expect(links.slug('The `task_usage` counters')).toBe('the-task_usage-counters');
    expect(links.slug('**Bold** and [a link](x.md)')).toBe('bold-and-a-link');
    expect(links.slug('Before — after')).toBe('before--after');
    expect(links.slug('Größe 2026-07-28')).toBe('größe-2026-07-28');
  });

  it('numbers repeated headings, reads explicit ids, and ignores headings in code', () => {
    const md = [
      '# Page',
      '## Run',
      '## Run',
      '<a id="alert-mcpinstancedown"></a>',
      '```sh',
      '# not a heading',
      '```',
    ].join('\n');
    expect([...links.anchorsOf(md)].sort()).toEqual(['alert-mcpinstancedown', 'page', 'run', 'run-1']);
  });

  it('finds inline links and reference definitions, but none in code', () => {
    const md = ['See [a](a.md#x) and `[b](b.md)`.', '[ref]: c.md', '```', '[d](d.md)', '```'].join('\n');
    expect(links.linksOf(md)).toEqual([
      { target: 'a.md#x', line: 1 },
      { target: 'c.md', line: 2 },
    ]);
  });

  it('reports missing files and anchors, and passes good links', () => {
    mkdirSync(join(dir, 'docs'), { recursive: true });
    writeFileSync(join(dir, 'docs', 'other.md'), '# Other\n\n## Known section\n');
    const page = join(dir, 'docs', 'page.md');
    const md = [
      '# Page',
      '[ok](other.md#known-section) [self](#page) [site](https://example.com/#nope) [folder](../docs)',
      '[gone](missing.md)',
      '[bad anchor](other.md#unknown)',
    ].join('\n');
    writeFileSync(page, md);
    const problems = links.checkPage(page, md, (p) => (p === page ? md : '# Other\n\n## Known section\n'));
    expect(problems).toHaveLength(2);
    expect(problems[0]).toMatch(/page\.md:3: missing\.md: no such file$/);
    expect(problems[1]).toMatch(/page\.md:4: other\.md#unknown: no heading or id "unknown" in /);
  });
});
