import { Controller, Get, Module, Req, Res, UseGuards } from '@nestjs/common';
import type { Request, Response } from 'express';
import { AuthChallenges, requiredScopesMissing } from '../../src/principals/auth-challenges.js';
import { McpAuthGuard } from '../../src/principals/mcp-auth.guard.js';
import type { Principal, RequestWithPrincipal } from '../../src/principals/principal.js';

// What the authentication e2e suites share: a probe behind the real guard, the deployment's names, and a
// parser for the challenges it answers with.

/** Test-only scaffolding: a controller behind the real guard, as the gateway will put /mcp behind it. */
@Controller('probe')
@UseGuards(McpAuthGuard)
export class ProbeController {
  constructor(private readonly challenges: AuthChallenges) {}

  @Get()
  whoami(@Req() req: RequestWithPrincipal): Principal | undefined {
    return req.principal;
  }

  /** What the gateway does for a tool with `scopes: ['admin:write']`. */
  @Get('admin')
  admin(@Req() req: Request & RequestWithPrincipal, @Res({ passthrough: true }) res: Response): string {
    const principal = req.principal as Principal;
    if (requiredScopesMissing(principal, ['admin:write']).length > 0) {
      throw this.challenges.reject(res, this.challenges.insufficientScope(req, ['admin:write']));
    }
    return 'ok';
  }
}

@Module({ controllers: [ProbeController] })
export class ProbeModule {}

export const RESOURCE = 'https://mcp.example.test/mcp';
export const METADATA = 'https://mcp.example.test/.well-known/oauth-protected-resource/mcp';
export const PROXY_SECRET = 'proxy-secret-0123456789abcdef';
export const METRICS_TOKEN = 'metrics-token-abcdef';

/** `Bearer a="x", b="y"` → { a: 'x', b: 'y' } */
export function challengeParams(header: string | undefined): Record<string, string> {
  expect(header).toMatch(/^Bearer /);
  const params: Record<string, string> = {};
  for (const m of (header ?? '').slice(7).matchAll(/([a-z_]+)="((?:[^"\\]|\\.)*)"/g)) params[m[1]] = m[2];
  return params;
}
