import { randomBytes } from 'node:crypto';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import {
  apiKeysSetting,
  backendSettings,
  newTenant,
  rawRequest,
  type RunningApp,
  startApp,
} from '../support/app';

/**
 * The status routes of durable jobs (migrations, rewraps) take the job id from the path. An id no
 * job can have (dot segments, a `%`, a `?`) is an unknown job: 404 with the error JSON, never
 * passed on to the durable client (which would put it into a URL as it is). A path that does not
 * decode at all (malformed percent-encoding) is 400, as on every route.
 */
describe('job status routes with ids no job can have', () => {
  const ops = newTenant('ops', true);
  let app: RunningApp;

  beforeAll(async () => {
    app = await startApp({
      CAIRN_API_KEYS: apiKeysSetting([ops]),
      CAIRN_ENCRYPTION_KEYS: `k1:${randomBytes(32).toString('hex')}`,
      ...backendSettings('local', ''),
    });
  });
  afterAll(async () => app.stop());

  it.each(['/api/migrations', '/api/encryption/rewraps'])(
    '%s/{id} answers 404 for an id no job can have, 400 for one that does not decode',
    async (route) => {
      const answers = [
        ...['%25', '..%2F..%2Forchestrators%2Fx', 'a.b', 'a%3Fb=1'].map((id) => ({
          id,
          status: 404,
          code: 'not_found',
        })),
        ...['%zz', '%%', '%F4%90%80%80'].map((id) => ({ id, status: 400, code: 'invalid_argument' })),
      ];
      for (const { id, status, code } of answers) {
        const answer = await rawRequest(app.url, `${route}/${id}`, {
          headers: { authorization: `Bearer ${ops.key}` },
        });
        expect(answer.status, `${route}/${id}: ${answer.body}`).toBe(status);
        expect((JSON.parse(answer.body) as { error: { code: string } }).error.code).toBe(code);
      }
    },
  );

  it("answers 404 for another kind of job's id: a rewrap job is no migration", async () => {
    const auth = { authorization: `Bearer ${ops.key}` };
    const started = await rawRequest(app.url, '/api/encryption/rewraps', {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: '{}',
    });
    expect(started.status, started.body).toBe(202);
    const { id } = JSON.parse(started.body) as { id: string };
    const asRewrap = await rawRequest(app.url, `/api/encryption/rewraps/${id}`, { headers: auth });
    expect(asRewrap.status, asRewrap.body).toBe(200);
    const asMigration = await rawRequest(app.url, `/api/migrations/${id}`, { headers: auth });
    expect(asMigration.status, asMigration.body).toBe(404);
    expect((JSON.parse(asMigration.body) as { error: { code: string } }).error.code).toBe('not_found');
  });
});
