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
 * job can have (malformed percent-encoding, dot segments, a `%`) is an unknown job: 404 with the
 * error JSON, never passed on to the durable client (which would put it into a URL as it is).
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

  it.each(['/api/migrations', '/api/encryption/rewraps'])('%s/{id} answers 404', async (route) => {
    for (const id of ['%25', '%zz', '%%', '%F4%90%80%80', '..%2F..%2Forchestrators%2Fx', 'a.b', 'a%3Fb=1']) {
      const answer = await rawRequest(app.url, `${route}/${id}`, {
        headers: { authorization: `Bearer ${ops.key}` },
      });
      expect(answer.status, `${route}/${id}: ${answer.body}`).toBe(404);
      expect((JSON.parse(answer.body) as { error: { code: string } }).error.code).toBe('not_found');
    }
  });
});
