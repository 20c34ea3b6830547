import { createHash } from 'node:crypto';

import { createRemoteJWKSet, errors as joseErrors, jwtVerify, type JWTVerifyGetKey } from 'jose';

import type { ApiKeyEntry, EntraConfig } from './config';
import { StorageUnavailableError, UnauthorizedError } from './protocol/errors';
import { isValidTenantId } from './protocol/tenants/tenantIds';

/** Who is calling: the tenant comes from the credential, never from the request. */
export interface Principal {
  readonly tenant: string;
  readonly admin: boolean;
  /** The access token's subject (`sub`), when the credential is a token. */
  readonly subject?: string;
}

/** Who an audit record names as the actor: the token's subject, else the tenant (never the token). */
export function actorOf(principal: Principal): string {
  return principal.subject ?? principal.tenant;
}

export const ADMIN_ROLE = 'Cairn.Admin';
const JWT_SHAPE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;

export function sha256Hex(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

/**
 * The key set's getter, with every failure to get a usable key set (unreachable, timed out, an
 * answer other than 200, not JSON, not a key set, a key that does not import) turned into 503
 * `storage_unavailable`: our side's fault, retryable, never a 401 the client would not retry. What
 * is the token's own fault stays as jose raised it (401): no key of the set has its `kid` (after
 * one reload of the set), several do, or its algorithm is not one a key set serves.
 */
function keySetOrUnavailable(getKey: JWTVerifyGetKey): JWTVerifyGetKey {
  return async (header, token) => {
    try {
      return await getKey(header, token);
    } catch (error) {
      if (
        error instanceof joseErrors.JWKSNoMatchingKey ||
        error instanceof joseErrors.JWKSMultipleMatchingKeys ||
        error instanceof joseErrors.JOSENotSupported
      ) {
        throw error;
      }
      throw new StorageUnavailableError('could not fetch the token signing keys; retry later', {
        cause: error,
      });
    }
  };
}

/**
 * Checks bearer credentials: API keys (compared by their SHA-256, so configuration holds no key in
 * clear) and, when configured, Entra ID access tokens verified in-process with `jose` (signature
 * against the JWKS, a required `exp`, `nbf`, issuer and audience; a key set that cannot be
 * fetched is 503, see {@link keySetOrUnavailable}). Tokens are never logged or kept.
 */
export class Authenticator {
  private readonly keysByHash: ReadonlyMap<string, Principal>;
  private readonly jwks: JWTVerifyGetKey | undefined;

  constructor(
    apiKeys: readonly ApiKeyEntry[],
    private readonly entra?: EntraConfig,
    /** How long a fetch of the key set may take before the request answers 503. */
    jwksTimeoutMs = 5000,
  ) {
    this.keysByHash = new Map(
      apiKeys.map((entry) => [entry.sha256, { tenant: entry.tenant, admin: entry.admin }]),
    );
    this.jwks =
      entra &&
      keySetOrUnavailable(createRemoteJWKSet(new URL(entra.jwksUri), { timeoutDuration: jwksTimeoutMs }));
  }

  /** The caller of a request with this `Authorization` header; throws UnauthorizedError otherwise. */
  async authenticate(authorization: string | null | undefined): Promise<Principal> {
    const match = /^Bearer +(\S+) *$/i.exec(authorization ?? '');
    const token = match?.[1];
    if (token === undefined) {
      throw new UnauthorizedError('send a credential as "Authorization: Bearer <API key or access token>"');
    }
    if (this.entra !== undefined && this.jwks !== undefined && JWT_SHAPE.test(token)) {
      return this.verifyAccessToken(token, this.entra, this.jwks);
    }
    const principal = this.keysByHash.get(sha256Hex(token));
    if (principal === undefined) throw new UnauthorizedError('the credential is not valid');
    return principal;
  }

  private async verifyAccessToken(
    token: string,
    entra: EntraConfig,
    jwks: JWTVerifyGetKey,
  ): Promise<Principal> {
    let payload;
    try {
      ({ payload } = await jwtVerify(token, jwks, {
        issuer: entra.issuer,
        audience: entra.audience,
        // A token without an expiry would be valid for ever: refused, as docs/api.md says.
        requiredClaims: ['exp'],
      }));
    } catch (error) {
      if (error instanceof StorageUnavailableError) throw error;
      if (error instanceof joseErrors.JWTExpired) throw new UnauthorizedError('the access token has expired');
      if (error instanceof joseErrors.JWTClaimValidationFailed && error.reason === 'missing') {
        throw new UnauthorizedError(`the access token has no "${error.claim}" claim`);
      }
      throw new UnauthorizedError('the access token is not valid for this service');
    }
    const tenant = payload[entra.tenantClaim];
    if (typeof tenant !== 'string' || !isValidTenantId(tenant)) {
      throw new UnauthorizedError(`the access token has no usable "${entra.tenantClaim}" claim`);
    }
    const roles = payload['roles'];
    const subject =
      typeof payload.sub === 'string' && /^[\x21-\x7e]{1,256}$/.test(payload.sub) ? payload.sub : undefined;
    return {
      tenant,
      admin: Array.isArray(roles) && roles.includes(ADMIN_ROLE),
      ...(subject === undefined ? {} : { subject }),
    };
  }
}
