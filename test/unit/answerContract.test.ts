import http from 'node:http';
import type { AddressInfo } from 'node:net';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { checkAnswer, ContractViolation, takeContractViolations } from '../support/answerContract';
import { client, rawRequest } from '../support/app';

/**
 * The end-to-end tests' HTTP helpers hold every answer to the OpenAPI document: shown here against
 * a stand-in server whose answers are wrong in known ways, so the check is proven able to fail.
 */
describe('the HTTP helpers of the end-to-end tests', () => {
  let server: http.Server;
  let url: string;

  beforeAll(async () => {
    server = http.createServer((request, response) => {
      const headers = { 'content-type': 'application/json', 'x-request-id': 'r-1' };
      if (request.url === '/api/health') {
        // `version` is missing.
        response.writeHead(200, headers).end(JSON.stringify({ status: 'ok', backend: 'local' }));
      } else if (request.url === '/api/keys') {
        response.writeHead(200, headers).end(JSON.stringify({ keys: ['a'], cursor: null }));
      } else {
        // A status the catch-all does not document.
        response.writeHead(418, headers).end(JSON.stringify({ error: { code: 'teapot', message: 'no' } }));
      }
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('pass an answer as documented through', async () => {
    const response = await client(url, 'key')('/api/keys');
    expect(await response.json()).toEqual({ keys: ['a'], cursor: null });
  });

  it('reject an answer whose body misses a field', async () => {
    await expect(client(url)('/api/health')).rejects.toThrow(
      /GET \/api\/health → 200: the body .* must have required property 'version'/,
    );
    expect(takeContractViolations()).toHaveLength(1);
  });

  it('reject a status the operation does not document, through rawRequest too', async () => {
    await expect(rawRequest(url, '/api/no/such/route')).rejects.toThrow(
      /status 418 is not documented for GET \/api\/\{path\}/,
    );
    expect(takeContractViolations()).toHaveLength(1);
  });

  it('keep a violation whose rejection a test caught, for the hooks that fail the test', () => {
    const wrong = {
      method: 'GET',
      path: '/api/health',
      status: 200,
      header: (name: string) => ({ 'content-type': 'application/json', 'x-request-id': 'r-1' })[name],
      json: { status: 'ok', backend: 'local' },
    };
    expect(() => checkAnswer(wrong)).toThrow(ContractViolation);
    // The rejection is swallowed here; the violation is still there for contractHooks.ts.
    expect(takeContractViolations()).toEqual([expect.stringMatching(/required property 'version'/)]);
    expect(takeContractViolations()).toEqual([]);
  });

  it('do not check the answers of apps that are not Cairn', async () => {
    const response = await client(url, undefined, { contract: false })('/api/health');
    expect(response.status).toBe(200);
    expect(takeContractViolations()).toEqual([]);
  });
});
