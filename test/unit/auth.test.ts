import { type webcrypto } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

import { exportJWK, generateKeyPair, type JWTPayload, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { actorOf, Authenticator, sha256Hex } from '../../shared/auth';
import { StorageUnavailableError, UnauthorizedError } from '../../shared/protocol/errors';

const ISSUER = 'https://login.example.test/tenant-1/v2.0';
const AUDIENCE = 'api://cairn-test';

describe('API keys', () => {
  const authenticator = new Authenticator([
    { tenant: 'alpha', sha256: sha256Hex('alpha-key'), admin: false },
    { tenant: 'ops', sha256: sha256Hex('ops-key'), admin: true },
  ]);

  it('maps a known key to its tenant and role', async () => {
    await expect(authenticator.authenticate('Bearer alpha-key')).resolves.toEqual({
      tenant: 'alpha',
      admin: false,
    });
    await expect(authenticator.authenticate('bearer ops-key')).resolves.toEqual({
      tenant: 'ops',
      admin: true,
    });
  });

  it.each([
    ['no header', undefined],
    ['empty header', ''],
    ['another scheme', 'Basic YWxwaGEta2V5'],
    ['no token', 'Bearer '],
    ['an unknown key', 'Bearer alpha-key2'],
    ['the hash instead of the key', `Bearer ${sha256Hex('alpha-key')}`],
  ])('refuses %s', async (_name, header) => {
    await expect(authenticator.authenticate(header)).rejects.toBeInstanceOf(UnauthorizedError);
  });
});

describe('Entra ID access tokens (JWKS served by this test)', () => {
  let server: http.Server;
  let jwksUri: string;
  let signingKey: webcrypto.CryptoKey;
  let strangerKey: webcrypto.CryptoKey;
  let authenticator: Authenticator;

  beforeAll(async () => {
    const pair = await generateKeyPair('RS256');
    signingKey = pair.privateKey;
    strangerKey = (await generateKeyPair('RS256')).privateKey;
    const jwk = { ...(await exportJWK(pair.publicKey)), kid: 'k1', alg: 'RS256', use: 'sig' };
    server = http.createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ keys: [jwk] }));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    jwksUri = `http://127.0.0.1:${(server.address() as AddressInfo).port}/keys`;
    authenticator = new Authenticator([], {
      issuer: ISSUER,
      audience: AUDIENCE,
      jwksUri,
      tenantClaim: 'oid',
    });
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  function token(
    payload: JWTPayload,
    options: {
      key?: webcrypto.CryptoKey;
      issuer?: string;
      audience?: string;
      expires?: string | number;
    } = {},
  ) {
    return new SignJWT(payload)
      .setProtectedHeader({ alg: 'RS256', kid: 'k1' })
      .setIssuer(options.issuer ?? ISSUER)
      .setAudience(options.audience ?? AUDIENCE)
      .setIssuedAt()
      .setExpirationTime(options.expires ?? '5m')
      .sign(options.key ?? signingKey);
  }

  it('takes the tenant from the oid claim and admin from the Cairn.Admin role', async () => {
    await expect(authenticator.authenticate(`Bearer ${await token({ oid: 'agent-1' })}`)).resolves.toEqual({
      tenant: 'agent-1',
      admin: false,
    });
    await expect(
      authenticator.authenticate(`Bearer ${await token({ oid: 'ops-1', roles: ['Reader', 'Cairn.Admin'] })}`),
    ).resolves.toEqual({ tenant: 'ops-1', admin: true });
  });

  it("keeps the token's subject, which audit records name as the actor (never the token)", async () => {
    const principal = await authenticator.authenticate(
      `Bearer ${await token({ oid: 'agent-1', sub: 'user-7' })}`,
    );
    expect(principal).toEqual({ tenant: 'agent-1', admin: false, subject: 'user-7' });
    expect(actorOf(principal)).toBe('user-7');
    expect(actorOf({ tenant: 'agent-1', admin: false })).toBe('agent-1');
  });

  it('uses the configured tenant claim', async () => {
    const byAppId = new Authenticator([], {
      issuer: ISSUER,
      audience: AUDIENCE,
      jwksUri,
      tenantClaim: 'azp',
    });
    await expect(
      byAppId.authenticate(`Bearer ${await token({ oid: 'x', azp: 'app-7' })}`),
    ).resolves.toMatchObject({
      tenant: 'app-7',
    });
  });

  it('refuses expired, not-yet-valid, foreign and unsigned tokens', async () => {
    const expired = await token({ oid: 'a' }, { expires: Math.floor(Date.now() / 1000) - 600 });
    await expect(authenticator.authenticate(`Bearer ${expired}`)).rejects.toThrow(/expired/);
    const notYet = await new SignJWT({ oid: 'a' })
      .setProtectedHeader({ alg: 'RS256', kid: 'k1' })
      .setIssuer(ISSUER)
      .setAudience(AUDIENCE)
      .setNotBefore('10m')
      .setExpirationTime('20m')
      .sign(signingKey);
    const cases = [
      notYet,
      await token({ oid: 'a' }, { audience: 'api://other' }),
      await token({ oid: 'a' }, { issuer: 'https://evil.example.test' }),
      await token({ oid: 'a' }, { key: strangerKey }),
      `${Buffer.from('{"alg":"none"}').toString('base64url')}.${Buffer.from('{"oid":"a"}').toString('base64url')}.`,
    ];
    for (const bad of cases) {
      await expect(authenticator.authenticate(`Bearer ${bad}`)).rejects.toBeInstanceOf(UnauthorizedError);
    }
  });

  it('refuses a token whose tenant claim is missing or not a valid tenant id', async () => {
    await expect(authenticator.authenticate(`Bearer ${await token({ sub: 'x' })}`)).rejects.toThrow(/oid/);
    await expect(authenticator.authenticate(`Bearer ${await token({ oid: '../x' })}`)).rejects.toBeInstanceOf(
      UnauthorizedError,
    );
  });

  it('answers unavailable (not unauthorized) when the signing keys cannot be fetched', async () => {
    const unreachable = new Authenticator([], {
      issuer: ISSUER,
      audience: AUDIENCE,
      jwksUri: 'http://127.0.0.1:1/keys',
      tenantClaim: 'oid',
    });
    await expect(unreachable.authenticate(`Bearer ${await token({ oid: 'a' })}`)).rejects.toBeInstanceOf(
      StorageUnavailableError,
    );
  });

  it('refuses a validly signed token without exp (it would never expire)', async () => {
    const noExp = await new SignJWT({ oid: 'a' })
      .setProtectedHeader({ alg: 'RS256', kid: 'k1' })
      .setIssuer(ISSUER)
      .setAudience(AUDIENCE)
      .setIssuedAt()
      .sign(signingKey);
    const refusal = authenticator.authenticate(`Bearer ${noExp}`);
    await expect(refusal).rejects.toBeInstanceOf(UnauthorizedError);
    await expect(refusal).rejects.toThrow(/"exp"/);
  });

  it('refuses (401) a token whose kid is not in a valid key set', async () => {
    const unknownKid = await new SignJWT({ oid: 'a' })
      .setProtectedHeader({ alg: 'RS256', kid: 'not-in-the-set' })
      .setIssuer(ISSUER)
      .setAudience(AUDIENCE)
      .setExpirationTime('5m')
      .sign(signingKey);
    await expect(authenticator.authenticate(`Bearer ${unknownKid}`)).rejects.toBeInstanceOf(
      UnauthorizedError,
    );
  });
});

describe('Entra ID access tokens when the key set is broken', () => {
  /** What the key set server answers: an error status, bytes that are not JSON, JSON that is not a key set, nothing. */
  type Fault = 'status 500' | 'not JSON' | 'not a key set' | 'no answer';
  const ANSWERS: Record<Exclude<Fault, 'no answer'>, { status: number; type: string; body: string }> = {
    'status 500': { status: 500, type: 'application/json', body: '{"error":"boom"}' },
    'not JSON': { status: 200, type: 'text/html', body: '<html>maintenance</html>' },
    'not a key set': { status: 200, type: 'application/json', body: '{"keys":"none"}' },
  };
  let server: http.Server;
  let baseUri: string;
  let signingKey: webcrypto.CryptoKey;

  beforeAll(async () => {
    signingKey = (await generateKeyPair('RS256')).privateKey;
    server = http.createServer((req, res) => {
      const fault = decodeURIComponent(req.url?.slice(1) ?? '') as Fault;
      if (fault === 'no answer') return; // hangs until the client gives up
      const answer = ANSWERS[fault];
      res.writeHead(answer.status, { 'content-type': answer.type });
      res.end(answer.body);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    baseUri = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  });
  afterAll(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );

  it.each<Fault>(['status 500', 'not JSON', 'not a key set', 'no answer'])(
    'answers unavailable (not unauthorized) when the key set server gives %s',
    async (fault) => {
      const authenticator = new Authenticator(
        [],
        {
          issuer: ISSUER,
          audience: AUDIENCE,
          jwksUri: baseUri + encodeURIComponent(fault),
          tenantClaim: 'oid',
        },
        200,
      );
      const token = await new SignJWT({ oid: 'a' })
        .setProtectedHeader({ alg: 'RS256', kid: 'k1' })
        .setIssuer(ISSUER)
        .setAudience(AUDIENCE)
        .setExpirationTime('5m')
        .sign(signingKey);
      await expect(authenticator.authenticate(`Bearer ${token}`)).rejects.toBeInstanceOf(
        StorageUnavailableError,
      );
    },
  );
});
