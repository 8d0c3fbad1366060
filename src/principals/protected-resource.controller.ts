import { Controller, Get, Header, Req } from '@nestjs/common';
import type { Request } from 'express';
import { AuthChallenges } from './auth-challenges.js';
import { PrincipalsConfig } from './principals.config.js';

/** RFC 9728 protected resource metadata (the subset MCP clients read). */
export interface ProtectedResourceMetadata {
  resource: string;
  authorization_servers?: string[];
  scopes_supported?: string[];
  bearer_methods_supported: ['header'];
  resource_name: string;
}

/**
 * RFC 9728 documents, unauthenticated: the root form and the path-inserted form for the /mcp endpoint
 * (MCP clients try the challenge's resource_metadata first, then path-inserted, then root).
 */
@Controller('.well-known/oauth-protected-resource')
export class ProtectedResourceController {
  constructor(
    private readonly config: PrincipalsConfig,
    private readonly challenges: AuthChallenges,
  ) {}

  @Get()
  @Header('Cache-Control', 'public, max-age=300')
  @Header('Access-Control-Allow-Origin', '*')
  root(@Req() req: Request): ProtectedResourceMetadata {
    return this.document(req);
  }

  @Get('mcp')
  @Header('Cache-Control', 'public, max-age=300')
  @Header('Access-Control-Allow-Origin', '*')
  mcp(@Req() req: Request): ProtectedResourceMetadata {
    return this.document(req);
  }

  private document(req: Request): ProtectedResourceMetadata {
    const scopes = this.challenges.scopesSupported;
    return {
      resource: this.challenges.resourceUrl(req),
      ...(this.config.hasAuthProvider('oidc') &&
        this.config.OIDC_ISSUER && { authorization_servers: [this.config.OIDC_ISSUER] }),
      ...(scopes.length > 0 && { scopes_supported: scopes }),
      bearer_methods_supported: ['header'],
      resource_name: 'mcp-task-server',
    };
  }
}
