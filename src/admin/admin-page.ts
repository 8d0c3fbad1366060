import type { Request } from 'express';
import type { Principal, RequestWithPrincipal } from '../principals/principal.js';

/** The admin the guard let in. */
export function operatorOf(req: Request): Principal {
  const p = (req as Request & RequestWithPrincipal).principal;
  if (!p) throw new Error('AdminGuard did not run on this route');
  return p;
}

/** What the layout shows of the operator. */
export function operatorLabel(p: Principal): { id: string; label: string } {
  return { id: p.id, label: p.name ?? p.email ?? p.subject };
}
