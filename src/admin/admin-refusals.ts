import { Injectable } from '@nestjs/common';
import { AuditTrail } from '../audit/audit-trail.service.js';

/** One `admin.refused` row per principal per this window; refusals in between are counted on the next row. */
const WINDOW_MS = 60_000;
/** Principals remembered at once; the oldest is forgotten first (it may then get one more row). */
const MAX_REMEMBERED = 1000;

/**
 * Writes the `admin.refused` audit rows, bounded: a principal hammering /admin costs one row a minute (with
 * detail.suppressed saying how many refusals it stands for) and never a synchronous insert on the request
 * path (the write is not awaited; AuditTrail.recordAlone never throws). Memory is bounded by MAX_REMEMBERED.
 */
@Injectable()
export class AdminRefusals {
  private readonly seen = new Map<string, { at: number; suppressed: number }>();

  constructor(private readonly audit: AuditTrail) {}

  note(principalId: string, method: string, route: string): void {
    const now = Date.now();
    const last = this.seen.get(principalId);
    if (last && now - last.at < WINDOW_MS) {
      last.suppressed++;
      return;
    }
    const suppressed = last?.suppressed ?? 0;
    this.seen.delete(principalId);
    this.seen.set(principalId, { at: now, suppressed: 0 });
    if (this.seen.size > MAX_REMEMBERED) this.seen.delete(this.seen.keys().next().value as string);
    void this.audit.recordAlone({
      kind: 'admin.refused',
      actor: 'owner',
      principal: principalId,
      detail: { method, route, ...(suppressed > 0 ? { suppressed } : {}) },
    });
  }
}
