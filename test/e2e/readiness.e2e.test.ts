import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';

import { afterEach, describe, expect, it } from 'vitest';

import { AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY } from '../../dev/azurite';
import {
  apiKeysSetting,
  backendSettings,
  client,
  newTenant,
  type RunningApp,
  startApp,
} from '../support/app';
import { azurite } from '../support/azurite';
import { startAzurite, tempDir } from '../support/cleanup';
import { memoryTableSettings, sessionIndexSettings } from '../support/tables';

/**
 * `GET /api/health/ready` over HTTP: 200 when every configured store answers, 503 naming the ones
 * that do not; `GET /api/health` (liveness) stays 200 either way. A store that is down is a port
 * nothing listens on, or (local backend) a data folder that is a file: no clock is involved.
 */

interface ReadyAnswer {
  readonly status: number;
  readonly retryAfter: string | null;
  readonly text: string;
  readonly checks: Record<string, string>;
  readonly code?: string;
  readonly message?: string;
}

const tenant = newTenant('ready');
let app: RunningApp | undefined;

afterEach(async () => {
  await app?.stop();
  app = undefined;
});

async function start(settings: Record<string, string>): Promise<RunningApp> {
  app = await startApp({ CAIRN_API_KEYS: apiKeysSetting([tenant]), ...settings });
  return app;
}

async function ready(running: RunningApp): Promise<ReadyAnswer> {
  // Anonymous, like liveness: no credential is sent.
  const response = await client(running.url)('/api/health/ready');
  const text = await response.text();
  const body = JSON.parse(text) as {
    checks?: Record<string, string>;
    error?: { code: string; message: string; checks: Record<string, string> };
  };
  return {
    status: response.status,
    retryAfter: response.headers.get('retry-after'),
    text,
    checks: body.checks ?? body.error?.checks ?? {},
    ...(body.error === undefined ? {} : { code: body.error.code, message: body.error.message }),
  };
}

async function expectAlive(running: RunningApp): Promise<void> {
  expect((await client(running.url)('/api/health')).status).toBe(200);
}

/** An endpoint on a port of this machine that nothing listens on. */
async function deadEndpoint(): Promise<string> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `http://127.0.0.1:${port}/${AZURITE_ACCOUNT}`;
}

function everyStoreSettings(blobEndpoint: string, tableEndpoint: string, queueEndpoint: string) {
  return {
    ...backendSettings('blob', blobEndpoint),
    ...sessionIndexSettings(tableEndpoint),
    ...memoryTableSettings(tableEndpoint),
    CAIRN_AUDIT: 'true',
    CAIRN_AUDIT_TABLE: `audit${randomUUID().replaceAll('-', '').slice(0, 20)}`,
    CAIRN_QUEUE_ENDPOINT: queueEndpoint,
    CAIRN_EMAIL_WINDOW_QUEUE: `ready-${randomUUID().slice(0, 8)}`,
  };
}

function expectNoSecret(answer: ReadyAnswer, ...secrets: string[]): void {
  for (const secret of [AZURITE_ACCOUNT_KEY, AZURITE_ACCOUNT, '127.0.0.1', ...secrets]) {
    expect(answer.text).not.toContain(secret);
  }
}

describe('readiness on the Blob backend', () => {
  it('is 200 when the container, every table and the queue answer (none of them created yet)', async () => {
    const { blobEndpoint, tableEndpoint, queueEndpoint } = azurite();
    const running = await start(everyStoreSettings(blobEndpoint, tableEndpoint, queueEndpoint));
    const answer = await ready(running);
    expect(answer.status).toBe(200);
    expect(JSON.parse(answer.text)).toEqual({
      status: 'ready',
      checks: { backend: 'ok', sessionIndex: 'ok', memory: 'ok', audit: 'ok', emailWindowQueue: 'ok' },
    });
    expectNoSecret(answer);
  });

  it('is 503 naming the stores that stopped answering, while liveness stays 200', async () => {
    // The container and the queue on an Azurite of this test's own, stopped once the app is up.
    const own = await startAzurite();
    const running = await start(
      everyStoreSettings(own.blobEndpoint, azurite().tableEndpoint, own.queueEndpoint),
    );
    await own.stop();
    const answer = await ready(running);
    expect(answer.status).toBe(503);
    expect(answer.code).toBe('storage_unavailable');
    expect(answer.retryAfter).toBe('1');
    const { backend, emailWindowQueue, ...answering } = answer.checks;
    expect(backend).not.toBe('ok');
    expect(emailWindowQueue).not.toBe('ok');
    expect(answering).toEqual({ sessionIndex: 'ok', memory: 'ok', audit: 'ok' });
    expect(answer.message).toMatch(/^not ready: backend .*emailWindowQueue/);
    expectNoSecret(answer, own.blobEndpoint, own.queueEndpoint);
    await expectAlive(running);
  });

  it('is 503 naming the tables when the table service is down and the container answers', async () => {
    const { blobEndpoint } = azurite();
    const deadTable = await deadEndpoint();
    const running = await start({
      ...backendSettings('blob', blobEndpoint),
      ...sessionIndexSettings(deadTable),
      ...memoryTableSettings(deadTable),
    });
    const answer = await ready(running);
    expect(answer.status).toBe(503);
    const { backend, ...tables } = answer.checks;
    expect(backend).toBe('ok');
    expect(Object.keys(tables).sort()).toEqual(['memory', 'sessionIndex']);
    expect(Object.values(tables)).not.toContain('ok');
    expectNoSecret(answer, deadTable);
    await expectAlive(running);
  });
});

describe('readiness on the local backend', () => {
  it('is 200 when the data folder can be written', async () => {
    const running = await start(backendSettings('local', ''));
    const answer = await ready(running);
    expect(answer.status).toBe(200);
    expect(JSON.parse(answer.text)).toEqual({ status: 'ready', checks: { backend: 'ok' } });
  });

  it('is 503 when the data folder is not a folder, while liveness stays 200', async () => {
    const file = path.join(tempDir('ready'), 'not-a-folder');
    writeFileSync(file, 'a file where the data folder should be');
    const running = await start({ CAIRN_DATA_DIR: file });
    const answer = await ready(running);
    expect(answer.status).toBe(503);
    expect(answer.checks).toEqual({ backend: 'failed' });
    expect(answer.retryAfter).toBe('1');
    expectNoSecret(answer, file);
    await expectAlive(running);
  });
});
