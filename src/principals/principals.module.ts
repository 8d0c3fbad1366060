import { Global, Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { ApiKey } from './api-key.entity.js';
import { ApiKeysRepository } from './api-keys.repository.js';
import { ApiKeysService } from './api-keys.service.js';
import { AuthChallenges } from './auth-challenges.js';
import { AuthMetrics } from './auth-metrics.js';
import { AuthPassport } from './auth-passport.js';
import { RequestAuthenticator } from './request-authenticator.js';
import { CredentialWatch } from './credential-watch.service.js';
import { McpAuthGuard } from './mcp-auth.guard.js';
import { PrincipalRecord } from './principal-record.entity.js';
import { PrincipalsRepository } from './principals.repository.js';
import { PrincipalsService } from './principals.service.js';
import { ProtectedResourceController } from './protected-resource.controller.js';
import { ApiKeyStrategy } from './strategies/api-key.strategy.js';
import { OidcVerifier } from './strategies/oidc-verifier.js';
import { OidcStrategy } from './strategies/oidc.strategy.js';
import { ProxyStrategy } from './strategies/proxy.strategy.js';

/**
 * Authentication: strategies, principals, API keys, challenges and the RFC 9728 documents. Global, so any
 * controller can say `@UseGuards(McpAuthGuard)` and any service can inject AuthChallenges.
 */
@Global()
@Module({
  imports: [TypeOrmModule.forFeature([PrincipalRecord, ApiKey])],
  controllers: [ProtectedResourceController],
  providers: [
    PrincipalsRepository,
    PrincipalsService,
    ApiKeysRepository,
    ApiKeysService,
    OidcVerifier,
    OidcStrategy,
    ProxyStrategy,
    ApiKeyStrategy,
    AuthPassport,
    AuthChallenges,
    AuthMetrics,
    RequestAuthenticator,
    McpAuthGuard,
    CredentialWatch,
  ],
  exports: [
    McpAuthGuard,
    CredentialWatch,
    AuthPassport,
    AuthChallenges,
    AuthMetrics,
    RequestAuthenticator,
    PrincipalsService,
    ApiKeysService,
  ],
})
export class PrincipalsModule {}
