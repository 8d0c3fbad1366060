import { HttpException, Injectable } from '@nestjs/common';
import type { Request, Response } from 'express';
import type { Principal } from './principal.js';
import { AuthFailure, AuthFailureReason } from './principals.errors.js';
import { PrincipalsConfig } from './principals.config.js';

/** Parameters of an RFC 6750 `WWW-Authenticate: Bearer` challenge (RFC 9728 adds resource_metadata). */
export interface BearerChallenge {
  resourceMetadata: string;
  scopes?: readonly string[];
  error?: 'invalid_token' | 'insufficient_scope' | 'invalid_request';
  errorDescription?: string;
}

/** What to answer: the status, the `WWW-Authenticate` value and a JSON body. */
export interface AuthChallenge {
  status: 401 | 403;
  wwwAuthenticate: string;
  body: { statusCode: number; error: string; message: string };
}

/** MCP 2026-07-28: servers SHOULD NOT put offline_access in challenges or scopes_supported. */
const NEVER_CHALLENGED = new Set(['offline_access']);

function quoted(value: string): string {
  return `"${value.replace(/[\\"]/g, (c) => `\\${c}`).replace(/[\r\n]/g, ' ')}"`;
}

/** The header value: `Bearer resource_metadata="…", scope="a b", error="…", error_description="…"`. */
export function buildBearerChallenge(c: BearerChallenge): string {
  const params = [`resource_metadata=${quoted(c.resourceMetadata)}`];
  const scopes = (c.scopes ?? []).filter((s) => !NEVER_CHALLENGED.has(s));
  if (scopes.length > 0) params.push(`scope=${quoted(scopes.join(' '))}`);
  if (c.error) params.push(`error=${quoted(c.error)}`);
  if (c.errorDescription) params.push(`error_description=${quoted(c.errorDescription)}`);
  return `Bearer ${params.join(', ')}`;
}

/**
 * The scopes of `required` that the principal does not hold (empty: allowed). Exact string match: this
 * server knows no scope hierarchy. The anonymous development principal is never refused for scopes, since
 * without providers nothing could ever grant them.
 */
export function requiredScopesMissing(principal: Principal, required: readonly string[]): string[] {
  if (principal.provider === 'anonymous') return [];
  const held = new Set(principal.scopes);
  return [...new Set(required)].filter((s) => !held.has(s));
}

/**
 * RFC 9728 §3.1 path insertion: `https://h/mcp` → `https://h/.well-known/oauth-protected-resource/mcp`.
 */
export function resourceMetadataUrl(resource: string): string {
  const url = new URL(resource);
  const path = url.pathname === '/' ? '' : url.pathname.replace(/\/+$/, '');
  return `${url.origin}/.well-known/oauth-protected-resource${path}`;
}

/** Thrown at the HTTP edge once the challenge header is on the response. */
export class AuthChallengeException extends HttpException {
  constructor(readonly challenge: AuthChallenge) {
    super(challenge.body, challenge.status);
  }
}

/**
 * Builds the 401 and 403 challenges of MCP authorization
 * (https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#error-handling): every one names the RFC 9728
 * document; 401 carries the scopes the endpoint needs and `error="invalid_token"` when a credential was
 * presented and refused; 403 carries `error="insufficient_scope"` and all the scopes the operation needs.
 */
@Injectable()
export class AuthChallenges {
  constructor(private readonly config: PrincipalsConfig) {}

  /** MCP_RESOURCE_URL, or (development without it) the /mcp URL the request came in on. */
  resourceUrl(req: Request): string {
    return this.config.MCP_RESOURCE_URL ?? `${req.protocol}://${req.get('host') ?? 'localhost'}/mcp`;
  }

  /** Scopes named in the RFC 9728 document. */
  get scopesSupported(): string[] {
    return [...new Set([...this.config.AUTH_REQUIRED_SCOPES, ...this.config.AUTH_SCOPES_SUPPORTED])].filter(
      (s) => !NEVER_CHALLENGED.has(s),
    );
  }

  unauthorized(req: Request, failure: AuthFailure): AuthChallenge {
    const baseScopes =
      this.config.AUTH_REQUIRED_SCOPES.length > 0
        ? this.config.AUTH_REQUIRED_SCOPES
        : this.config.AUTH_SCOPES_SUPPORTED;
    // RFC 6750 §3.1: a request without credentials gets a challenge without an error code.
    const presented =
      failure.reason !== AuthFailureReason.Missing && failure.reason !== AuthFailureReason.UntrustedProxy;
    return {
      status: 401,
      wwwAuthenticate: buildBearerChallenge({
        resourceMetadata: resourceMetadataUrl(this.resourceUrl(req)),
        scopes: baseScopes,
        ...(presented && { error: 'invalid_token', errorDescription: failure.message }),
      }),
      body: {
        statusCode: 401,
        error: presented ? 'invalid_token' : 'unauthorized',
        message: failure.message,
      },
    };
  }

  /**
   * 403 for an operation whose scopes the principal lacks. `required` is every scope the operation needs
   * (a tool's `scopes`); AUTH_REQUIRED_SCOPES is added, so the challenge names all of them at once.
   */
  insufficientScope(req: Request, required: readonly string[], description?: string): AuthChallenge {
    const scopes = [...new Set([...this.config.AUTH_REQUIRED_SCOPES, ...required])];
    const message = description ?? `This operation needs the scopes: ${scopes.join(' ')}`;
    return {
      status: 403,
      wwwAuthenticate: buildBearerChallenge({
        resourceMetadata: resourceMetadataUrl(this.resourceUrl(req)),
        scopes,
        error: 'insufficient_scope',
        errorDescription: message,
      }),
      body: { statusCode: 403, error: 'insufficient_scope', message },
    };
  }

  /** Puts the challenge header on the response and returns the exception to throw (filters keep the header). */
  reject(res: Response, challenge: AuthChallenge): AuthChallengeException {
    res.setHeader('WWW-Authenticate', challenge.wwwAuthenticate);
    res.setHeader('Cache-Control', 'no-store');
    return new AuthChallengeException(challenge);
  }
}
