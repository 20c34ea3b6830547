import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { Writable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';

import { BlobServiceClient, StorageSharedKeyCredential } from '@azure/storage-blob';
import { runCairn } from '@cairn-state/cli';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY } from '../../dev/azurite';
import {
  apiKeysSetting,
  type Backend,
  backendSettings,
  client,
  newTenant,
  type RunningApp,
  runTimer,
  startApp,
} from '../support/app';
import { azurite } from '../support/azurite';
import { memoryTableSettings, sessionIndexSettings } from '../support/tables';

/**
 * Retention over real HTTP, against the app in the local runtime, on both backends: the policy
 * routes (admin only, 400 naming the field, 413 first), a prune run by the admin route and by the
 * timer through the local runtime, `GET /api/verify`, and `cairn verify` as a process (exit codes,
 * JSON) and in-process on a terminal (the progress line).
 */

type Call = ReturnType<typeof client>;
const CLI = path.resolve('client/cli/dist/cjs/bin.js');
const BLOCK = 65_536;

function cairn(args: string[], env: Record<string, string>) {
  return new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    const child = spawn(process.execPath, [CLI, ...args], {
      env: { PATH: process.env['PATH'] ?? '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (data: Buffer) => (stdout += data.toString()));
    child.stderr.on('data', (data: Buffer) => (stderr += data.toString()));
    child.once('exit', (code) => resolve({ code: code ?? -1, stdout, stderr }));
  });
}

/** A stream that keeps what is written; `isTTY` as a terminal would say. */
function captured(isTTY: boolean): Writable & { isTTY: boolean; text: () => string } {
  let text = '';
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      text += chunk.toString();
      done();
    },
  });
  return Object.assign(stream, { isTTY, text: () => text });
}

const send = (call: Call, method: string, route: string, body?: unknown) =>
  call(route, {
    method,
    ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
  });

async function publishSession(call: Call, sessionId: string, bytes: Buffer): Promise<void> {
  const blocks = Math.floor(bytes.length / BLOCK);
  for (let index = 0; index < blocks; index++) {
    const response = await call(`/api/sessions/${sessionId}/objects/blocks/g1/${index}`, {
      method: 'PUT',
      body: bytes.subarray(index * BLOCK, (index + 1) * BLOCK),
    });
    expect(response.status).toBe(201);
  }
  const tail = bytes.subarray(blocks * BLOCK);
  expect(
    (await call(`/api/sessions/${sessionId}/objects/tails/c1/g1`, { method: 'PUT', body: tail })).status,
  ).toBe(201);
  const published = await send(call, 'POST', `/api/sessions/${sessionId}/checkpoints`, {
    checkpointId: 'c1',
    parent: null,
    files: [
      {
        path: 'events.jsonl',
        generation: 'g1',
        size: bytes.length,
        sha256: createHash('sha256').update(bytes).digest('hex'),
      },
    ],
  });
  expect(published.status).toBe(201);
}

async function putThread(call: Call, threadId: string): Promise<void> {
  const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64');
  const response = await send(call, 'POST', `/api/threads/${threadId}/checkpoints`, {
    checkpointId: 'c1',
    parent: null,
    checkpoint: { type: 'json', data: b64({ id: 'c1' }) },
    channelVersions: { messages: 1 },
    values: { messages: { type: 'json', data: b64(['hi']) } },
  });
  expect(response.status).toBe(201);
}

describe.each<Backend>(['local', 'blob'])('retention over HTTP on the %s backend', (backend) => {
  const ops = newTenant('ops', true);
  const alpha = newTenant('alpha');
  const beta = newTenant('beta');
  const settings = {
    ...backendSettings(backend, azurite().blobEndpoint),
    ...sessionIndexSettings(azurite().tableEndpoint),
    ...memoryTableSettings(azurite().tableEndpoint),
  };
  let app: RunningApp;
  let asOps: Call;
  let asAlpha: Call;
  let asBeta: Call;
  let anonymous: Call;

  beforeAll(async () => {
    app = await startApp({ CAIRN_API_KEYS: apiKeysSetting([ops, alpha, beta]), ...settings });
    asOps = client(app.url, ops.key);
    asAlpha = client(app.url, alpha.key);
    asBeta = client(app.url, beta.key);
    anonymous = client(app.url);
  });
  afterAll(async () => {
    await app.stop();
    if (settings['CAIRN_DATA_DIR'] !== undefined)
      await rm(settings['CAIRN_DATA_DIR'], { recursive: true, force: true });
  });

  it('reads, replaces and removes a policy (admin only; 400 names the field; 413 first)', async () => {
    const route = `/api/retention/policies/${alpha.tenant}`;
    const keepEverything = {
      threadTtlSeconds: null,
      keepCheckpoints: null,
      dropBranches: false,
      sessionTtlSeconds: null,
      interactionDays: null,
    };
    expect(await (await asOps(route)).json()).toEqual({
      tenant: alpha.tenant,
      override: null,
      defaults: keepEverything,
      effective: keepEverything,
    });
    const set = await send(asOps, 'PUT', route, { keepCheckpoints: 5, dropBranches: true });
    expect(set.status).toBe(200);
    expect(((await set.json()) as { effective: unknown }).effective).toEqual({
      ...keepEverything,
      keepCheckpoints: 5,
      dropBranches: true,
    });
    for (const [body, field] of [
      [{ keepCheckpoints: 0 }, 'keepCheckpoints'],
      [{ threadTtlSeconds: 'soon' }, 'threadTtlSeconds'],
      [{ everything: true }, 'everything'],
      ['not json', 'body'],
      [[1], 'policy'],
    ] as const) {
      const refused = await send(asOps, 'PUT', route, body);
      expect(refused.status).toBe(400);
      expect(((await refused.json()) as { error: { message: string } }).error.message).toMatch(
        new RegExp(`^${field}: `),
      );
    }
    expect((await send(asOps, 'PUT', route, { a: 'x'.repeat(5000) })).status).toBe(413);
    expect((await send(asOps, 'PUT', '/api/retention/policies/bad%20tenant', {})).status).toBe(400);
    // Non-admins: 403 on every retention route; no credential: 401.
    expect((await asAlpha(route)).status).toBe(403);
    expect((await send(asAlpha, 'PUT', route, {})).status).toBe(403);
    expect((await send(asAlpha, 'DELETE', route)).status).toBe(403);
    expect((await send(asAlpha, 'POST', '/api/retention/prune', {})).status).toBe(403);
    expect((await asAlpha('/api/verify')).status).toBe(403);
    expect((await asAlpha('/api/tenants')).status).toBe(403);
    expect((await anonymous('/api/verify')).status).toBe(401);
    expect((await send(asOps, 'DELETE', route)).status).toBe(204);
    expect(((await (await asOps(route)).json()) as { override: unknown }).override).toBeNull();
  });

  it('prunes by the admin route: threads, sessions and log days past the policy, and expired memory facts', async () => {
    await putThread(asAlpha, 'old');
    await publishSession(asAlpha, `${alpha.tenant}-s`, Buffer.alloc(70_000, 7));
    expect((await send(asAlpha, 'PUT', '/api/kv/interactions/2020-01-01.jsonl', '{"x":1}\n')).status).toBe(
      201,
    );
    expect(
      (await send(asAlpha, 'PUT', '/api/memory/facts?namespace=users/1&key=k', { value: 'v', ttl: 1 }))
        .status,
    ).toBe(201);
    expect(
      (
        await send(asOps, 'PUT', `/api/retention/policies/${alpha.tenant}`, {
          threadTtlSeconds: 1,
          sessionTtlSeconds: 1,
          interactionDays: 1,
        })
      ).status,
    ).toBe(200);
    await sleep(1500);
    const pruned = await send(asOps, 'POST', '/api/retention/prune', { tenant: alpha.tenant });
    expect(pruned.status).toBe(200);
    const report = (await pruned.json()) as { tenants: Record<string, unknown>[]; complete: boolean };
    expect(report.tenants).toHaveLength(1);
    expect(report.tenants[0]).toMatchObject({
      tenant: alpha.tenant,
      threadsDeleted: 1,
      threadsBusy: 0,
      checkpointsDeleted: 0,
      memoryItemsDeleted: 1,
      sessionsDeleted: 1,
      more: false,
    });
    expect(report.tenants[0]?.['objectsDeleted']).toBeGreaterThanOrEqual(5);
    expect((await asAlpha('/api/threads/old')).status).toBe(404);
    expect((await asAlpha(`/api/sessions/${alpha.tenant}-s`)).status).toBe(404);
    expect((await asAlpha(`/api/sessions/${alpha.tenant}-s/checkpoints/latest`)).status).toBe(404);
    expect((await asAlpha('/api/kv/interactions/2020-01-01.jsonl')).status).toBe(404);
    expect((await asAlpha('/api/memory/facts?namespace=users/1&key=k')).status).toBe(404);
    // The directory lists the tenant with where it stores data.
    const tenants = (await (await asOps('/api/tenants')).json()) as {
      tenants: { tenant: string; domains: string[] }[];
    };
    expect(tenants.tenants.find((entry) => entry.tenant === alpha.tenant)?.domains).toEqual([
      'kv',
      'memory',
      'sessions',
      'threads',
    ]);
  });

  it('runs the retentionPrune timer through the local runtime', async () => {
    await putThread(asBeta, 'timed');
    await send(asOps, 'PUT', `/api/retention/policies/${beta.tenant}`, { threadTtlSeconds: 1 });
    await sleep(1500);
    expect((await runTimer(app, 'retentionPrune')).status).toBe(202);
    let status = 0;
    for (let attempt = 0; attempt < 100 && status !== 404; attempt++) {
      status = (await asBeta('/api/threads/timed')).status;
      if (status !== 404) await sleep(200);
    }
    expect(status).toBe(404);
    for (let attempt = 0; attempt < 50 && !app.output().includes('retention prune finished'); attempt++) {
      await sleep(100);
    }
    expect(app.output()).toContain('retention prune finished');
    await send(asOps, 'DELETE', `/api/retention/policies/${beta.tenant}`);
  });

  it('verifies over HTTP and with cairn verify: clean, then a deleted block found (exit 1), usage errors exit 2', async () => {
    const sessionId = `${beta.tenant}-v`;
    await publishSession(asBeta, sessionId, Buffer.alloc(140_000, 3));
    const clean = await asOps(`/api/verify?tenant=${beta.tenant}&readData=true`);
    expect(clean.status).toBe(200);
    expect(await clean.json()).toMatchObject({
      ok: true,
      tenants: [
        {
          tenant: beta.tenant,
          ok: true,
          findingCount: 0,
          audit: { status: 'not_checked', reason: 'auditing off' },
        },
      ],
    });
    expect((await asOps('/api/verify?readData=maybe')).status).toBe(400);
    const env = { CAIRN_URL: app.url, CAIRN_KEY: ops.key };
    const ok = await cairn(['verify', '--tenant', beta.tenant, '--json'], env);
    expect(ok.code, ok.stderr).toBe(0);
    expect(JSON.parse(ok.stdout)).toMatchObject({ ok: true, tenants: [{ tenant: beta.tenant }] });

    // The block goes behind the service's back.
    if (backend === 'local') {
      await rm(path.join(settings['CAIRN_DATA_DIR']!, 'sessions', sessionId, 'blocks', 'g1', '1'));
    } else {
      const service = new BlobServiceClient(
        azurite().blobEndpoint,
        new StorageSharedKeyCredential(AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY),
      );
      await service
        .getContainerClient(settings['CAIRN_BLOB_CONTAINER']!)
        .deleteBlob(`sessions/${sessionId}/blocks/g1/1`);
    }
    const damaged = await cairn(['verify', '--tenant', beta.tenant], env);
    expect(damaged.code).toBe(1);
    expect(damaged.stdout).toContain(`missing ${sessionId}/blocks/g1/1`);
    expect(damaged.stdout).toContain('problems found: 1 tenant verified');
    expect(damaged.stdout).toContain('audit: not checked (auditing off)');

    // Every tenant, one request each, with a progress line on a terminal.
    const stdout = captured(false);
    const stderr = captured(true);
    const code = await runCairn(['verify'], env, { stdout, stderr });
    expect(code).toBe(1);
    expect(stderr.text()).toMatch(/verifying 1\/\d+: /);
    expect(stdout.text()).toContain(`${beta.tenant}: PROBLEMS`);

    expect((await cairn(['verify', '--no-such-option'], env)).code).toBe(2);
    expect((await cairn(['verify', 'extra'], env)).code).toBe(2);
    expect((await cairn(['verify'], { CAIRN_URL: app.url })).code).toBe(2);
    const notAdmin = await cairn(['verify', '--tenant', beta.tenant], { ...env, CAIRN_KEY: beta.key });
    expect(notAdmin.code).toBe(1);
    expect(notAdmin.stderr).toContain('403');
  });
});
