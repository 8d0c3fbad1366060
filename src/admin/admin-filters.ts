import { BadRequestException } from '@nestjs/common';
import { TASK_STATUSES, type TaskStatus } from '../tasks/task-state.js';
import type { ConsoleTaskFilter, ConsoleTaskPosition } from '../tasks/store/tasks-admin.repository.js';
import type { ConsoleSessionPosition } from '../sessions/sessions-admin.repository.js';

/*
 * The console's query strings, read strictly: a value that is not what the form sends is a 400 page that
 * names the field, never a query with a half-understood filter (and never a 500 from the database).
 */

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const DURATION = /^(\d{1,6})(s|m|h|d)$/;
const DURATION_MS = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;
/** A control character: never in an owner id or a tool name. */
const CONTROL = /\p{Cc}/u;

/** The filter as the form shows it back (strings, empty when unset). */
export interface TaskFilterForm {
  status: string;
  tool: string;
  owner: string;
  instance: string;
  newer: string;
  older: string;
}

type Query = Record<string, unknown>;

function one(q: Query, name: string, maxLength: number): string | undefined {
  const v = q[name];
  if (v === undefined || v === '') return undefined;
  if (typeof v !== 'string') throw new BadRequestException(`${name} must be given once`);
  const t = v.trim();
  if (t === '') return undefined;
  if (t.length > maxLength || CONTROL.test(t)) {
    throw new BadRequestException(`${name} must be text of at most ${maxLength} characters`);
  }
  return t;
}

function duration(q: Query, name: string): number | undefined {
  const v = one(q, name, 8);
  if (v === undefined) return undefined;
  const m = DURATION.exec(v);
  if (!m) throw new BadRequestException(`${name} must be a duration such as 30m, 6h or 7d`);
  return Number(m[1]) * DURATION_MS[m[2] as keyof typeof DURATION_MS];
}

/** `after`: the keyset position of the previous page's last row, as the console wrote it. */
function position(q: Query): { at: Date; id: string } | undefined {
  const v = one(q, 'after', 600);
  if (v === undefined) return undefined;
  const bad = new BadRequestException('after is not a page position this console wrote');
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(v, 'base64url').toString('utf8'));
  } catch {
    throw bad;
  }
  const p = parsed as { t?: unknown; i?: unknown } | null;
  if (typeof p?.t !== 'string' || typeof p.i !== 'string' || p.i.length > 512) throw bad;
  const at = new Date(p.t);
  if (Number.isNaN(at.getTime())) throw bad;
  return { at, id: p.i };
}

export function encodePosition(at: Date, id: string): string {
  return Buffer.from(JSON.stringify({ t: at.toISOString(), i: id }), 'utf8').toString('base64url');
}

export function parseTaskQuery(
  q: Query,
  now = Date.now(),
): {
  filter: ConsoleTaskFilter;
  form: TaskFilterForm;
  after?: ConsoleTaskPosition;
} {
  const status = one(q, 'status', 32);
  if (status !== undefined && !(TASK_STATUSES as readonly string[]).includes(status)) {
    throw new BadRequestException(`status must be one of ${TASK_STATUSES.join(', ')}`);
  }
  const instance = one(q, 'instance', 36);
  if (instance !== undefined && !UUID.test(instance))
    throw new BadRequestException('instance must be a uuid');
  const newer = duration(q, 'newer');
  const older = duration(q, 'older');
  const at = position(q);
  const filter: ConsoleTaskFilter = {
    status: status as TaskStatus | undefined,
    toolName: one(q, 'tool', 200),
    ownerId: one(q, 'owner', 512),
    instanceId: instance?.toLowerCase(),
    createdAfter: newer === undefined ? undefined : new Date(now - newer),
    createdBefore: older === undefined ? undefined : new Date(now - older),
  };
  const text = (name: string): string => (typeof q[name] === 'string' ? q[name].trim() : '');
  return {
    filter,
    form: {
      status: status ?? '',
      tool: filter.toolName ?? '',
      owner: filter.ownerId ?? '',
      instance: filter.instanceId ?? '',
      newer: text('newer'),
      older: text('older'),
    },
    after: at ? { createdAt: at.at, id: at.id } : undefined,
  };
}

export function parseSessionQuery(q: Query): { owner?: string; after?: ConsoleSessionPosition } {
  const at = position(q);
  return { owner: one(q, 'owner', 512), after: at ? { lastSeenAt: at.at, id: at.id } : undefined };
}

/** The query string of `form` plus `extra`, without empty fields. */
export function queryString(form: Record<string, string>, extra: Record<string, string> = {}): string {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries({ ...form, ...extra })) if (v !== '') p.set(k, v);
  const s = p.toString();
  return s === '' ? '' : `?${s}`;
}
