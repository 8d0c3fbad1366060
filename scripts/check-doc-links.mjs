// Checks every relative link and #anchor in the documentation: README.md, docs/**/*.md, bench/README.md and
// deploy/**/*.md. A link must name a file or folder of the repository; an #anchor must be a heading of the
// target page (GitHub's slugs: lower case, punctuation dropped, spaces to hyphens, -1, -2 for repeats) or an
// explicit <a id="…">. Links to other sites are not fetched. Exits 1 with one line per broken link.
//
//   npm run docs:links
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** GitHub's anchor for a heading's text (the rendered text: inline markup is dropped first). */
export function slug(heading) {
  const text = heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1') // [text](url) -> text
    .replace(/<[^>]+>/g, '') // inline HTML
    .replace(/[`*]/g, '') // code and emphasis markers
    .replace(/(^|\s)_+|_+(\s|$)/g, '$1$2'); // _emphasis_, but not snake_case
  return text
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\p{M}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

/** Lines outside fenced code blocks, with their 1-based numbers. */
function proseLines(markdown) {
  const out = [];
  let fence = null;
  markdown.split('\n').forEach((line, i) => {
    const m = /^\s*(`{3,}|~{3,})/.exec(line);
    if (m) {
      if (fence === null) fence = m[1][0];
      else if (m[1][0] === fence) fence = null;
      return;
    }
    if (fence === null) out.push({ line, n: i + 1 });
  });
  return out;
}

/** Every anchor a page offers: its headings' slugs (repeats numbered as GitHub does) and explicit ids. */
export function anchorsOf(markdown) {
  const anchors = new Set();
  const seen = new Map();
  for (const { line } of proseLines(markdown)) {
    const h = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (h) {
      const base = slug(h[1]);
      const count = seen.get(base) ?? 0;
      seen.set(base, count + 1);
      anchors.add(count === 0 ? base : `${base}-${count}`);
    }
    for (const a of line.matchAll(/<a\s+(?:[^>]*\s)?(?:id|name)="([^"]+)"/g)) anchors.add(a[1]);
  }
  return anchors;
}

/** The links of a page: inline `[text](target)` and reference definitions `[label]: target`, not in code. */
export function linksOf(markdown) {
  const links = [];
  for (const { line, n } of proseLines(markdown)) {
    const prose = line.replace(/`[^`]*`/g, (s) => ' '.repeat(s.length));
    for (const m of prose.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g))
      links.push({ target: m[1], line: n });
    const def = /^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)/.exec(prose);
    if (def) links.push({ target: def[1], line: n });
  }
  return links;
}

/** The broken links of one page, as `file:line: target: reason`. `read` returns a page's text (cached). */
export function checkPage(file, markdown, read) {
  const problems = [];
  for (const { target, line } of linksOf(markdown)) {
    if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto:, ...
    const hashAt = target.indexOf('#');
    const pathPart = decodeURIComponent(hashAt < 0 ? target : target.slice(0, hashAt));
    const anchor = hashAt < 0 ? null : decodeURIComponent(target.slice(hashAt + 1));
    const where = `${relative(ROOT, file)}:${line}: ${target}`;
    const dest = pathPart === '' ? file : resolve(dirname(file), pathPart.replace(/^\//, ''));
    if (pathPart.startsWith('/')) {
      problems.push(`${where}: absolute path; use a relative link`);
      continue;
    }
    if (!existsSync(dest)) {
      problems.push(`${where}: no such file`);
      continue;
    }
    if (anchor === null || anchor === '') continue;
    if (statSync(dest).isDirectory() || !dest.endsWith('.md')) {
      problems.push(`${where}: an #anchor on something that is not a Markdown page`);
      continue;
    }
    if (!anchorsOf(read(dest)).has(anchor))
      problems.push(`${where}: no heading or id "${anchor}" in ${relative(ROOT, dest)}`);
  }
  return problems;
}

function markdownUnder(dir) {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name);
    if (e.isDirectory()) return markdownUnder(p);
    return e.name.endsWith('.md') ? [p] : [];
  });
}

/** The pages checked: README.md, docs/**, bench/README.md, deploy/**. */
export function pagesToCheck(root = ROOT) {
  return [
    join(root, 'README.md'),
    ...markdownUnder(join(root, 'docs')),
    join(root, 'bench', 'README.md'),
    ...markdownUnder(join(root, 'deploy')),
  ].filter((p) => existsSync(p));
}

function main() {
  const cache = new Map();
  const read = (p) => {
    if (!cache.has(p)) cache.set(p, readFileSync(p, 'utf8'));
    return cache.get(p);
  };
  const pages = pagesToCheck();
  const problems = pages.flatMap((p) => checkPage(p, read(p), read));
  if (problems.length > 0) {
    console.error(`Broken documentation links (${problems.length}):`);
    for (const p of problems) console.error(`  ${p}`);
    process.exit(1);
  }
  console.log(`docs:links: ${pages.length} pages, every relative link and anchor resolves`);
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) main();
