import http from 'node:http';
import type { AddressInfo } from 'node:net';

import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { backendSettings, client, type RunningApp, startApp } from '../support/app';

/**
 * Entra ID access tokens over real HTTP: the app verifies them in-process against a JWKS served by
 * this test; the tenant is the `oid` claim, so two agents are two tenants.
 */
describe('Entra ID bearer tokens end to end', () => {
  const issuer = 'https://login.example.test/tenant-9/v2.0';
  const audience = 'api://cairn-e2e';
  let jwks: http.Server;
  let app: RunningApp;
  let sign: (claims: Record<string, unknown>, expires?: number | string) => Promise<string>;
  let signWithoutExpiry: (claims: Record<string, unknown>) => Promise<string>;

  beforeAll(async () => {
    const { publicKey, privateKey } = await generateKeyPair('RS256');
    const jwk = { ...(await exportJWK(publicKey)), kid: 'e2e', alg: 'RS256', use: 'sig' };
    jwks = http.createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ keys: [jwk] }));
    });
    await new Promise<void>((resolve) => jwks.listen(0, '127.0.0.1', resolve));
    sign = (claims, expires = '10m') =>
      new SignJWT(claims)
        .setProtectedHeader({ alg: 'RS256', kid: 'e2e' })
        .setIssuer(issuer)
        .setAudience(audience)
        .setIssuedAt()
        .setExpirationTime(expires)
        .sign(privateKey);
    signWithoutExpiry = (claims) =>
      new SignJWT(claims)
        .setProtectedHeader({ alg: 'RS256', kid: 'e2e' })
        .setIssuer(issuer)
        .setAudience(audience)
        .setIssuedAt()
        .sign(privateKey);
    app = await startApp({
      CAIRN_AUTH_ISSUER: issuer,
      CAIRN_AUTH_AUDIENCE: audience,
      CAIRN_AUTH_JWKS_URI: `http://127.0.0.1:${(jwks.address() as AddressInfo).port}/keys`,
      ...backendSettings('local', ''),
    });
  });
  afterAll(async () => {
    await app.stop();
    await new Promise<void>((resolve) => jwks.close(() => resolve()));
  });

  it('scopes data by the oid claim, refuses bad tokens, and never logs a token', async () => {
    const tokenA = await sign({ oid: 'agent-a' });
    const tokenB = await sign({ oid: 'agent-b', roles: ['Cairn.Admin'] });
    const asA = client(app.url, tokenA);
    const asB = client(app.url, tokenB);
    expect((await asA('/api/kv/memory/plan', { method: 'PUT', body: 'a-plan' })).status).toBe(201);
    expect(await (await asA('/api/kv/memory/plan')).text()).toBe('a-plan');
    expect((await asB('/api/kv/memory/plan')).status).toBe(404);
    expect(await (await asB('/api/keys')).json()).toEqual({ keys: [], cursor: null });

    const expired = await sign({ oid: 'agent-a' }, Math.floor(Date.now() / 1000) - 300);
    const wrongAudience = await new SignJWT({ oid: 'agent-a' })
      .setProtectedHeader({ alg: 'RS256', kid: 'e2e' })
      .setIssuer(issuer)
      .setAudience('api://someone-else')
      .setExpirationTime('10m')
      .sign((await generateKeyPair('RS256')).privateKey);
    for (const token of [expired, wrongAudience, 'not-a-token']) {
      const response = await client(app.url, token)('/api/kv/memory/plan');
      expect(response.status).toBe(401);
      expect(response.headers.get('www-authenticate')).toBe('Bearer');
    }
    const output = app.output();
    for (const token of [tokenA, tokenB, expired]) expect(output).not.toContain(token);
    expect(output).toContain('"tenant":"agent-a"');
  });

  it('refuses a validly signed token without exp: 401, it would never expire', async () => {
    const response = await client(app.url, await signWithoutExpiry({ oid: 'agent-no-exp' }))('/api/keys');
    expect(response.status).toBe(401);
    expect(response.headers.get('www-authenticate')).toBe('Bearer');
    const body = (await response.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe('unauthorized');
    expect(body.error.message).toMatch(/"exp"/);
  });
});

/**
 * A key set that cannot be had is the service's fault, not the caller's: 503 with Retry-After (a
 * client retries it), never 401 (a client would drop its token). The test's key set server answers
 * as `mode` says at the time of each fetch; nothing is cached until a fetch succeeds.
 */
describe('Entra ID bearer tokens with a broken key set, end to end', () => {
  const issuer = 'https://login.example.test/tenant-broken/v2.0';
  const audience = 'api://cairn-e2e-broken';
  type Mode = 'status 500' | 'not JSON' | 'no answer' | 'keys';
  let mode: Mode = 'status 500';
  let jwks: http.Server;
  let app: RunningApp;
  let token: string;

  beforeAll(async () => {
    const { publicKey, privateKey } = await generateKeyPair('RS256');
    const jwk = { ...(await exportJWK(publicKey)), kid: 'broken-e2e', alg: 'RS256', use: 'sig' };
    jwks = http.createServer((_req, res) => {
      if (mode === 'no answer') return; // the app gives up after its own timeout
      if (mode === 'status 500') {
        res.writeHead(500, { 'content-type': 'application/json' });
        res.end('{"error":"boom"}');
      } else if (mode === 'not JSON') {
        res.writeHead(200, { 'content-type': 'text/html' });
        res.end('<html>down for maintenance</html>');
      } else {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ keys: [jwk] }));
      }
    });
    await new Promise<void>((resolve) => jwks.listen(0, '127.0.0.1', resolve));
    token = await new SignJWT({ oid: 'agent-broken-keys' })
      .setProtectedHeader({ alg: 'RS256', kid: 'broken-e2e' })
      .setIssuer(issuer)
      .setAudience(audience)
      .setExpirationTime('10m')
      .sign(privateKey);
    app = await startApp({
      CAIRN_AUTH_ISSUER: issuer,
      CAIRN_AUTH_AUDIENCE: audience,
      CAIRN_AUTH_JWKS_URI: `http://127.0.0.1:${(jwks.address() as AddressInfo).port}/keys`,
      ...backendSettings('local', ''),
    });
  });
  afterAll(async () => {
    await app.stop();
    jwks.closeAllConnections();
    await new Promise<void>((resolve) => jwks.close(() => resolve()));
  });

  it('answers 503 with Retry-After while the key set answers 500, is not JSON or does not answer; 200 once it is back', async () => {
    for (const broken of ['status 500', 'not JSON', 'no answer'] as const) {
      mode = broken;
      const response = await client(app.url, token)('/api/keys');
      expect({ broken, status: response.status }).toEqual({ broken, status: 503 });
      expect(response.headers.get('retry-after')).toBe('1');
      const body = (await response.json()) as { error: { code: string } };
      expect(body.error.code).toBe('storage_unavailable');
    }
    mode = 'keys';
    const response = await client(app.url, token)('/api/keys');
    expect(response.status).toBe(200);
  });
});
