import type { INestApplication } from '@nestjs/common';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { REPO_ROOT } from '../support/server-process.js';
import { PROXY_SECRET, asUser, freshUser, waitFor } from '../support/tasks-e2e.js';
import { createTestApp, loopbackUrl } from '../support/test-app.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';

/** Debian's chromium package (installed by .ci/run when missing); playwright-core downloads no browser. */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const CHROMIUM_FLAGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
];
const ADMIN_GROUP = 'mcp-operators';
/** The screenshots docs/operations.md ("Console") shows. */
const IMAGES = join(REPO_ROOT, 'docs', 'images');

/**
 * The console in a real headless Chromium: an operator signed in by the SSO proxy (its identity headers, as
 * the browser context's extra headers) filters the tasks, opens one and cancels it, and the task's owner,
 * polling with the official MCP SDK client, sees it cancelled. The pages' screenshots go to docs/images/.
 */
describe('the /admin console in a real browser', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let base: string;
  let profile: string;
  let browser: BrowserContext;
  const owner = freshUser('analyst');
  let sdk: Client;

  async function ownerTask(args: Record<string, unknown>, name = 'slow_compute'): Promise<string> {
    for await (const message of sdk.experimental.tasks.callToolStream(
      { name, arguments: args },
      CallToolResultSchema,
      { task: { ttl: 600_000 } },
    )) {
      if (message.type === 'taskCreated') return message.task.taskId;
      if (message.type === 'error') throw message.error;
    }
    throw new Error('no task created');
  }

  const shot = (page: Page, name: string) =>
    page.screenshot({ path: join(IMAGES, `console-${name}.png`), fullPage: true });

  beforeAll(async () => {
    db = await createTestDatabase('admin_browser');
    app = await createTestApp(db.url, {
      AUTH_PROVIDERS: 'proxy',
      AUTH_PROXY_SECRET: PROXY_SECRET,
      ADMIN_GROUPS: ADMIN_GROUP,
      MCP_CONFORMANCE_FIXTURES: 'true',
    });
    base = await loopbackUrl(app);
    sdk = new Client({ name: 'console-owner', version: '1.0.0' }, { capabilities: {} });
    await sdk.connect(
      new StreamableHTTPClientTransport(new URL(`${base}/mcp`), { requestInit: { headers: asUser(owner) } }),
    );
    await mkdir(IMAGES, { recursive: true });
    profile = await mkdtemp(join(tmpdir(), 'console-chromium-'));
    browser = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      args: CHROMIUM_FLAGS,
      viewport: { width: 1360, height: 820 },
      extraHTTPHeaders: { ...asUser('ops-alice'), 'x-forwarded-groups': ADMIN_GROUP },
    });
  });
  afterAll(async () => {
    await browser?.close();
    await sdk?.close().catch(() => undefined);
    await app?.close();
    await db?.drop();
    if (profile) await rm(profile, { recursive: true, force: true });
  });

  it('signs in through the proxy, filters, opens a task, cancels it; the owner sees cancelled', async () => {
    // A few finished tasks around the one the operator will cancel, and a failed one.
    for (const label of ['daily', 'weekly', 'monthly']) await ownerTask({ seconds: 0, label });
    const failing = await ownerTask({}, 'failing_job');
    await waitFor(
      () => sdk.experimental.tasks.getTask(failing),
      (t) => t.status === 'failed',
      { what: 'failing_job to fail', timeoutMs: 10_000 },
    );
    const stuck = await ownerTask({ seconds: 600, label: 'stuck' });
    expect((await sdk.experimental.tasks.getTask(stuck)).status).toBe('working');

    const page = await browser.newPage();
    // Every error the page reports (a CSP violation, a failed script) and every refused request it makes,
    // except the favicon the browser asks the site root for on its own.
    const problems: string[] = [];
    page.on('console', (m) => {
      if (m.type() === 'error' && !m.text().startsWith('Failed to load resource')) problems.push(m.text());
    });
    page.on('response', (r) => {
      if (r.status() >= 400 && new URL(r.url()).pathname !== '/favicon.ico')
        problems.push(`${r.status()} ${r.url()}`);
    });
    const landed = await page.goto(`${base}/admin`);
    expect(landed?.status()).toBe(200);
    expect(new URL(page.url()).pathname).toBe('/admin/tasks');
    await page.locator('header .who').filter({ hasText: 'ops-alice' }).waitFor();
    expect(await page.locator('table.list td span.status-failed').count()).toBe(1);
    await expect(page.locator('[data-count="failed"]').innerText()).resolves.toBe('1');
    await shot(page, 'tasks');

    // Filter: working tasks of slow_compute.
    await page.selectOption('select[name="status"]', 'working');
    await page.fill('input[name="tool"]', 'slow_compute');
    await Promise.all([page.waitForURL(/status=working/), page.click('form.filters button[type="submit"]')]);
    const rows = page.locator('table.list tbody tr');
    expect(await rows.count()).toBe(1);
    await expect(rows.first().innerText()).resolves.toContain(stuck);

    // The live counts refresh in place (the console's one script, allowed by the CSP).
    const working = page.locator('[data-count="working"]');
    const before = Number(await working.textContent());
    const another = await ownerTask({ seconds: 600, label: 'another' });
    await working.filter({ hasText: String(before + 1) }).waitFor({ timeout: 10_000 });

    // Open the task, cancel it.
    await Promise.all([
      page.waitForURL(new RegExp(`/admin/tasks/${stuck}$`)),
      page.click(`a[href="/admin/tasks/${stuck}"]`),
    ]);
    await page.locator('h1').filter({ hasText: stuck }).waitFor();
    await shot(page, 'task');
    await Promise.all([page.waitForURL(/flash=cancelled/), page.click('button:has-text("Cancel task")')]);
    await page.locator('.flash').filter({ hasText: 'Task cancelled.' }).waitFor();
    await expect(page.locator('h1 .status').innerText()).resolves.toBe('cancelled');
    await shot(page, 'task-cancelled');

    // The owner, polling its task with the MCP client, sees what the operator did.
    const seen = await waitFor(
      () => sdk.experimental.tasks.getTask(stuck),
      (t) => t.status === 'cancelled',
      { what: 'the owner to see the task cancelled', timeoutMs: 10_000 },
    );
    expect(seen).toMatchObject({
      taskId: stuck,
      status: 'cancelled',
      statusMessage: 'Cancelled by an operator',
    });

    // The other pages, for the docs.
    for (const name of ['sessions', 'instances', 'janitor', 'quotas']) {
      const res = await page.goto(`${base}/admin/${name}`);
      expect([name, res?.status()]).toEqual([name, 200]);
      await shot(page, name);
    }
    expect(problems).toEqual([]);
    await sdk.experimental.tasks.cancelTask(another);
  }, 60_000);

  it("pauses a tool's queue from the Queue page: the owner's call waits, then runs once resumed", async () => {
    const page = await browser.newPage();
    const problems: string[] = [];
    page.on('console', (m) => {
      if (m.type() === 'error' && !m.text().startsWith('Failed to load resource')) problems.push(m.text());
    });
    expect((await page.goto(`${base}/admin/queue`))?.status()).toBe(200);
    const row = page.locator('tr[data-tool="limited_job"]');
    await expect(row.locator('td.paused').innerText()).resolves.toBe('no');
    await Promise.all([page.waitForURL(/flash=paused/), row.locator('button:has-text("Pause")').click()]);
    await page.locator('.flash').filter({ hasText: 'Paused on every instance' }).waitFor();
    await expect(row.locator('td.paused').innerText()).resolves.toBe('yes');

    // The owner's call of the paused tool is accepted as a task that waits, saying why.
    const waiting = await ownerTask({ ms: 0, key: 'browser' }, 'limited_job');
    await new Promise((r) => setTimeout(r, 500));
    const held = await sdk.experimental.tasks.getTask(waiting);
    expect(held.status).toBe('working');
    expect(held.statusMessage).toContain('paused');
    await page.reload();
    await expect(row.locator('td').nth(4).innerText()).resolves.toBe('1');
    await shot(page, 'queue');

    await Promise.all([page.waitForURL(/flash=resumed/), row.locator('button:has-text("Resume")').click()]);
    await page.locator('.flash').filter({ hasText: 'Resumed' }).waitFor();
    await expect(row.locator('td.paused').innerText()).resolves.toBe('no');
    await waitFor(
      () => sdk.experimental.tasks.getTask(waiting),
      (t) => t.status === 'completed',
      { what: 'the resumed task to complete', timeoutMs: 10_000 },
    );
    expect(problems).toEqual([]);
  }, 30_000);

  it('refuses a signed-in principal that is no admin with 403 on every page', async () => {
    // Another fresh profile, whose proxy headers name a principal outside ADMIN_GROUPS.
    const otherProfile = await mkdtemp(join(tmpdir(), 'console-chromium-'));
    const ctx = await chromium.launchPersistentContext(otherProfile, {
      executablePath: CHROMIUM,
      headless: true,
      args: CHROMIUM_FLAGS,
      extraHTTPHeaders: { ...asUser('mallory'), 'x-forwarded-groups': 'eng' },
    });
    try {
      const page = await ctx.newPage();
      for (const path of [
        '/admin',
        '/admin/tasks',
        '/admin/sessions',
        '/admin/instances',
        '/admin/janitor',
        '/admin/quotas',
        '/admin/queue',
      ]) {
        const res = await page.goto(`${base}${path}`);
        expect([path, res?.status()]).toEqual([path, 403]);
        await expect(page.locator('h1').innerText()).resolves.toContain('Forbidden');
      }
    } finally {
      await ctx.close();
      await rm(otherProfile, { recursive: true, force: true });
    }
  }, 30_000);
});
