import { DomainError } from '../common/domain-error.js';

export enum SessionErrorCode {
  SESSION_NOT_FOUND = 'SESSION_NOT_FOUND',
}

/** Unknown, ended, expired, or someone else's session: all the same to the caller. */
export class SessionError extends DomainError<SessionErrorCode> {}
