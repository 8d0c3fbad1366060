import {
  exportJWK,
  exportSPKI,
  generateKeyPair,
  SignJWT,
  type CryptoKey,
  type JWK,
  type JWTPayload,
} from 'jose';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

interface SigningKey {
  kid: string;
  privateKey: CryptoKey;
  publicKey: CryptoKey;
  jwk: JWK;
}

export interface SignOptions {
  kid?: string;
  /** Seconds from now; negative for an expired token. Default 300. */
  expiresIn?: number;
  notBefore?: number;
  issuer?: string;
  audience?: string | string[];
  subject?: string;
  /** The JOSE `typ` header; default `at+jwt` (RFC 9068). `null` leaves it out. */
  typ?: string | null;
}

/**
 * A real OpenID provider for tests, on loopback: discovery document, JWKS (counting fetches), and RS256
 * signing with keys that can be rotated. Nothing leaves the machine.
 */
export class TestIssuer {
  readonly keys: SigningKey[] = [];
  /** Keys that are in `keys` but not (yet) published in the JWKS. */
  private readonly unpublished = new Set<string>();
  jwksFetches = 0;
  discoveryFetches = 0;
  private server?: Server;
  issuer = '';
  audience = '';

  static async start(audience: string): Promise<TestIssuer> {
    const t = new TestIssuer();
    t.audience = audience;
    await t.addKey('key-1');
    t.server = createServer((req, res) => {
      if (req.url === '/.well-known/openid-configuration') {
        t.discoveryFetches++;
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ issuer: t.issuer, jwks_uri: `${t.issuer}/jwks` }));
      } else if (req.url === '/jwks') {
        t.jwksFetches++;
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ keys: t.keys.filter((k) => !t.unpublished.has(k.kid)).map((k) => k.jwk) }));
      } else {
        res.statusCode = 404;
        res.end();
      }
    });
    await new Promise<void>((resolve) => t.server?.listen(0, '127.0.0.1', resolve));
    t.issuer = `http://127.0.0.1:${(t.server.address() as AddressInfo).port}`;
    return t;
  }

  get jwksUri(): string {
    return `${this.issuer}/jwks`;
  }

  /** A new key pair; published in the JWKS unless `publish` is false. */
  async addKey(kid: string, publish = true): Promise<SigningKey> {
    const { privateKey, publicKey } = await generateKeyPair('RS256', { extractable: true });
    const jwk = { ...(await exportJWK(publicKey)), kid, alg: 'RS256', use: 'sig' };
    const key = { kid, privateKey, publicKey, jwk };
    this.keys.push(key);
    if (!publish) this.unpublished.add(kid);
    return key;
  }

  key(kid = 'key-1'): SigningKey {
    const k = this.keys.find((x) => x.kid === kid);
    if (!k) throw new Error(`no key ${kid}`);
    return k;
  }

  async publicKeyPem(kid = 'key-1'): Promise<string> {
    return exportSPKI(this.key(kid).publicKey);
  }

  claims(claims: JWTPayload, o: SignOptions = {}): SignJWT {
    const now = Math.floor(Date.now() / 1000);
    const jwt = new SignJWT(claims)
      .setIssuer(o.issuer ?? this.issuer)
      .setAudience(o.audience ?? this.audience)
      .setSubject(o.subject ?? 'user-1')
      .setIssuedAt(now)
      .setExpirationTime(now + (o.expiresIn ?? 300));
    if (o.notBefore !== undefined) jwt.setNotBefore(now + o.notBefore);
    return jwt;
  }

  /** An RS256 token signed with one of this issuer's keys. */
  async sign(claims: JWTPayload = {}, o: SignOptions = {}): Promise<string> {
    const kid = o.kid ?? 'key-1';
    return this.claims(claims, o)
      .setProtectedHeader({
        alg: 'RS256',
        kid,
        ...(o.typ !== null && { typ: o.typ ?? 'at+jwt' }),
      })
      .sign(this.key(kid).privateKey);
  }

  async close(): Promise<void> {
    await new Promise<void>((resolve) => this.server?.close(() => resolve()));
  }
}

/** An unsigned token (`alg: none`) with the given claims. */
export function unsignedToken(payload: JWTPayload): string {
  const enc = (o: object): string => Buffer.from(JSON.stringify(o)).toString('base64url');
  return `${enc({ alg: 'none', typ: 'JWT' })}.${enc(payload)}.`;
}
