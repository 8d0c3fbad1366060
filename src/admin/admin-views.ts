import { Injectable } from '@nestjs/common';
import type { Response } from 'express';
import Handlebars from 'handlebars';
import { ERROR_VIEW } from './views/error.view.js';
import { INSTANCES_VIEW } from './views/instances.view.js';
import { JANITOR_VIEW } from './views/janitor.view.js';
import { LAYOUT_VIEW } from './views/layout.view.js';
import { QUEUE_VIEW } from './views/queue.view.js';
import { QUOTAS_VIEW } from './views/quotas.view.js';
import { SESSIONS_VIEW } from './views/sessions.view.js';
import { TASK_VIEW } from './views/task.view.js';
import { TASKS_VIEW } from './views/tasks.view.js';

const PAGES = {
  tasks: TASKS_VIEW,
  task: TASK_VIEW,
  sessions: SESSIONS_VIEW,
  instances: INSTANCES_VIEW,
  janitor: JANITOR_VIEW,
  quotas: QUOTAS_VIEW,
  queue: QUEUE_VIEW,
  error: ERROR_VIEW,
} as const;
export type AdminPage = keyof typeof PAGES;

/** The CSP of every /admin answer: only this origin's two assets, no inline code, never framed. */
export const ADMIN_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
  "form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/** Security headers of every /admin answer (pages, assets, refusals). */
export function setAdminHeaders(res: Response): void {
  res.setHeader('Content-Security-Policy', ADMIN_CSP);
  res.setHeader('X-Frame-Options', 'DENY');
  res.setHeader('X-Content-Type-Options', 'nosniff');
  // Not no-referrer: under it Chromium sends `Origin: null` on the console's own form POSTs, which the
  // same-origin check (admin-csrf.ts) must refuse. same-origin still sends nothing to other sites.
  res.setHeader('Referrer-Policy', 'same-origin');
  res.setHeader('Cross-Origin-Opener-Policy', 'same-origin');
  res.setHeader('Cross-Origin-Resource-Policy', 'same-origin');
  // Pages show other principals' data: never kept by a shared cache or the browser's back-forward store.
  res.setHeader('Cache-Control', 'no-store');
}

const UNITS: [number, string][] = [
  [86_400_000, 'd'],
  [3_600_000, 'h'],
  [60_000, 'min'],
  [1000, 's'],
];

function ago(value: unknown): string {
  if (!(value instanceof Date)) return '–';
  const ms = Date.now() - value.getTime();
  const abs = Math.abs(ms);
  const [unit, name] = UNITS.find(([u]) => abs >= u) ?? [1000, 's'];
  const n = Math.floor(abs / unit);
  return ms >= 0 ? `${n} ${name} ago` : `in ${n} ${name}`;
}

function bytes(value: unknown): string {
  if (typeof value !== 'number') return '–';
  if (value < 1024) return `${value} B`;
  if (value < 1024 * 1024) return `${(value / 1024).toFixed(1)} KiB`;
  return `${(value / 1024 / 1024).toFixed(1)} MiB`;
}

/**
 * The console's Handlebars templates, compiled once at startup from the TS string constants in views/ (the
 * build copies no other files). Handlebars escapes every `{{value}}`; no template uses the unescaped
 * `{{{ }}}` form, so whatever a task or a principal carries is shown as text.
 */
@Injectable()
export class AdminViews {
  private readonly hbs = Handlebars.create();
  private readonly pages: Record<AdminPage, Handlebars.TemplateDelegate>;

  constructor() {
    const h = this.hbs;
    h.registerHelper('eq', (a: unknown, b: unknown) => a === b);
    h.registerHelper('isNull', (a: unknown) => a === null || a === undefined);
    h.registerHelper('iso', (d: unknown) => (d instanceof Date ? d.toISOString() : '–'));
    h.registerHelper('ago', ago);
    h.registerHelper('bytes', bytes);
    // A value put into a URL's query or path (Handlebars escapes for HTML, not for URLs).
    h.registerHelper('url', (v: unknown) => (typeof v === 'string' ? encodeURIComponent(v) : ''));
    h.registerHelper('short', (id: unknown) => (typeof id === 'string' ? id.slice(0, 8) : ''));
    h.registerHelper('json', (v: unknown) => (v === null || v === undefined ? '' : JSON.stringify(v)));
    h.registerHelper('bounded', (c: unknown) => {
      const v = c as { count?: number; atLeast?: boolean } | undefined;
      return v?.count === undefined ? '–' : `${v.count}${v.atLeast ? '+' : ''}`;
    });
    h.registerPartial('layout', h.compile(LAYOUT_VIEW, { strict: false }));
    this.pages = Object.fromEntries(
      Object.entries(PAGES).map(([name, text]) => [name, h.compile(text)]),
    ) as Record<AdminPage, Handlebars.TemplateDelegate>;
  }

  html(page: AdminPage, context: Record<string, unknown>): string {
    return this.pages[page](context);
  }

  /** Sends `page` as the answer (security headers included). */
  send(res: Response, page: AdminPage, context: Record<string, unknown>, status = 200): void {
    setAdminHeaders(res);
    res.status(status).type('html').send(this.html(page, context));
  }
}
