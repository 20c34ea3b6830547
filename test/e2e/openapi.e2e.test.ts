import { readFileSync } from 'node:fs';
import path from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { documentForVersion } from '../../shared/api/openapi';
import {
  apiKeysSetting,
  backendSettings,
  client,
  newTenant,
  type RunningApp,
  startApp,
} from '../support/app';

/** The OpenAPI document as the app serves it: anonymous, JSON, the module's document with the app's version. */
describe('GET /api/openapi.json', () => {
  const tenant = newTenant('reader');
  let app: RunningApp;
  let anonymous: ReturnType<typeof client>;

  beforeAll(async () => {
    app = await startApp({ CAIRN_API_KEYS: apiKeysSetting([tenant]), ...backendSettings('local', '') });
    anonymous = client(app.url);
  });
  afterAll(async () => app.stop());

  it('serves the document without credentials, with the version of package.json', async () => {
    const response = await anonymous('/api/openapi.json');
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^application\/json/);
    const version = (JSON.parse(readFileSync(path.resolve('package.json'), 'utf8')) as { version: string })
      .version;
    expect(await response.json()).toEqual(documentForVersion(version));
    const health = (await (await anonymous('/api/health')).json()) as { version: string };
    expect(health.version).toBe(version);
  });

  it('serves it to a caller with a credential too, and only with GET', async () => {
    expect((await client(app.url, tenant.key)('/api/openapi.json')).status).toBe(200);
    const post = await anonymous('/api/openapi.json', { method: 'POST', body: '{}' });
    expect(post.status).toBe(405);
    expect(post.headers.get('allow')).toBe('GET');
  });
});
