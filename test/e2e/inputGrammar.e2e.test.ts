import { existsSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import path from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { jsonDepth, MAX_JSON_DEPTH } from '../../shared/json';
import type { MemoryStore } from '../../shared/memory/memoryStore';
import { TableMemoryStore } from '../../shared/storage/azure/tableMemoryStore';
import { LocalMemoryStore } from '../../shared/storage/local/localMemoryStore';
import {
  apiKeysSetting,
  type Backend,
  backendSettings,
  client,
  newTenant,
  type RunningApp,
  startApp,
} from '../support/app';
import { azurite } from '../support/azurite';
import { azuriteTable, memoryTableSettings, sessionIndexSettings } from '../support/tables';
import { STORAGE_TIMEOUT_MS } from '../support/timeouts';

/**
 * What no input may do, over real HTTP on both backends: JSON nested deeper than MAX_JSON_DEPTH is
 * refused (400 naming the field, nothing written), a value stored that deep anyway (below the API,
 * straight into the store) breaks no read, and keys, prefixes and names holding Unicode
 * noncharacters are refused alike on both backends.
 */

type Call = ReturnType<typeof client>;

/** The JSON text `[[[…leaf…]]]`, `depth` arrays deep. */
function nestedText(depth: number, leaf = '"needle"'): string {
  return `${'['.repeat(depth)}${leaf}${']'.repeat(depth)}`;
}

/** The probe's depth: a stack overflow in any recursive walk. */
const PROBE_DEPTH = 4100;
/** Deeper than JSON.stringify itself can go, yet within a fact's 32 KiB. */
const STORED_DEPTH = 12_000;

async function errorOf(response: Response): Promise<{ code: string; message: string }> {
  return ((await response.json()) as { error: { code: string; message: string } }).error;
}

async function expectRefused(response: Response, field: string): Promise<void> {
  expect(response.status).toBe(400);
  const error = await errorOf(response);
  expect(error.code).toBe('invalid_argument');
  expect(error.message.startsWith(`${field}: `), error.message).toBe(true);
}

const factPath = (namespace: string, key: string) =>
  `/api/memory/facts?${new URLSearchParams({ namespace, key }).toString()}`;

const sendJson = (call: Call, path: string, method: string, text: string) =>
  call(path, { method, body: text, headers: { 'content-type': 'application/json' } });

describe.each<Backend>(['local', 'blob'])('input grammar on the %s backend', (backend) => {
  const alpha = newTenant('grammar');
  let settings: Record<string, string>;
  let app: RunningApp;
  let asAlpha: Call;
  let facts: MemoryStore;

  beforeAll(async () => {
    const { blobEndpoint, tableEndpoint } = azurite();
    settings = {
      CAIRN_API_KEYS: apiKeysSetting([alpha]),
      ...backendSettings(backend, blobEndpoint),
      // Locally, facts and the session index stay in files (a table endpoint would take them).
      ...(backend === 'blob'
        ? { ...sessionIndexSettings(tableEndpoint), ...memoryTableSettings(tableEndpoint) }
        : {}),
    };
    app = await startApp(settings);
    asAlpha = client(app.url, alpha.key);
    facts =
      backend === 'local'
        ? new LocalMemoryStore(settings['CAIRN_DATA_DIR'] ?? '')
        : new TableMemoryStore(
            azuriteTable(tableEndpoint, settings['CAIRN_MEMORY_TABLE']),
            STORAGE_TIMEOUT_MS,
          );
  });
  afterAll(async () => {
    await app.stop();
    if (settings['CAIRN_DATA_DIR'] !== undefined)
      await rm(settings['CAIRN_DATA_DIR'], { recursive: true, force: true });
  });

  it('refuses a fact nested deeper than the limit with a 400 naming value, and stores nothing', async () => {
    const deep = await sendJson(
      asAlpha,
      factPath('deep/refused', 'k'),
      'PUT',
      `{"value":${nestedText(PROBE_DEPTH)}}`,
    );
    await expectRefused(deep, 'value');
    expect((await asAlpha(factPath('deep/refused', 'k'))).status).toBe(404);
    // One level down in the body, the value may nest one level less than the limit.
    const edge = await sendJson(
      asAlpha,
      factPath('deep/refused', 'edge'),
      'PUT',
      `{"value":${nestedText(MAX_JSON_DEPTH - 1)}}`,
    );
    expect(edge.status).toBe(201);
    const over = await sendJson(
      asAlpha,
      factPath('deep/refused', 'over'),
      'PUT',
      `{"value":${nestedText(MAX_JSON_DEPTH)}}`,
    );
    await expectRefused(over, 'value');
    const search = await sendJson(
      asAlpha,
      '/api/memory/search',
      'POST',
      JSON.stringify({ namespace: 'deep/refused' }),
    );
    expect(search.status).toBe(200);
    expect(((await search.json()) as { items: { key: string }[] }).items.map((item) => item.key)).toEqual([
      'edge',
    ]);
    const filter = await sendJson(
      asAlpha,
      '/api/memory/search',
      'POST',
      `{"namespace":"","filter":{"a":${nestedText(PROBE_DEPTH, '1')}}}`,
    );
    await expectRefused(filter, 'filter');
  });

  it('refuses deep session data and thread metadata with a 400 naming the field, and stores nothing', async () => {
    const sessionId = `deep-${alpha.tenant}`;
    const publish = await sendJson(
      asAlpha,
      `/api/sessions/${sessionId}/checkpoints`,
      'POST',
      `{"checkpointId":"c1","parent":null,"files":[],"data":{"a":${nestedText(PROBE_DEPTH)}}}`,
    );
    await expectRefused(publish, 'data');
    if (backend === 'blob') {
      expect((await asAlpha(`/api/sessions/${sessionId}/checkpoints/latest`)).status).toBe(404);
    } else {
      // Without a table service the local app keeps no session index: look at the files.
      expect(existsSync(path.join(settings['CAIRN_DATA_DIR'] ?? '', 'sessions', sessionId))).toBe(false);
    }

    expect((await asAlpha('/api/threads/deep', { method: 'PUT' })).status).toBe(201);
    const checkpoint = Buffer.from(JSON.stringify({ v: 4, id: 'c1' })).toString('base64');
    const put = await sendJson(
      asAlpha,
      '/api/threads/deep/checkpoints',
      'POST',
      `{"checkpointId":"c1","parent":null,"checkpoint":{"type":"json","data":"${checkpoint}"},"metadata":{"step":${nestedText(PROBE_DEPTH, '1')}},"channelVersions":{}}`,
    );
    await expectRefused(put, 'metadata');
    expect((await asAlpha('/api/threads/deep/checkpoints/latest')).status).toBe(404);
    const history = await asAlpha(
      `/api/threads/deep/checkpoints?${new URLSearchParams({ filter: `{"step":${nestedText(1000, '1')}}` }).toString()}`,
    );
    await expectRefused(history, 'filter');
  });

  it('answers every read of a fact stored deeper than the limit below the API', async () => {
    const now = Date.now();
    await facts.write(
      alpha.tenant,
      {
        namespace: 'stored/deep',
        key: 'old',
        value: Buffer.from(nestedText(STORED_DEPTH), 'utf8'),
        createdAt: now,
        updatedAt: now,
        expiresAt: null,
        incarnation: null,
        outbox: null,
      },
      null,
    );
    const neighbour = await sendJson(
      asAlpha,
      factPath('stored/deep', 'plain'),
      'PUT',
      '{"value":{"note":"needle here"}}',
    );
    expect(neighbour.status).toBe(201);

    for (const body of [
      { namespace: 'stored/deep', text: 'needle' },
      { namespace: 'stored', text: 'needle' },
      { namespace: '' },
      { namespace: '', text: 'needle', filter: { note: 'needle here' } },
    ]) {
      const search = await sendJson(asAlpha, '/api/memory/search', 'POST', JSON.stringify(body));
      expect(search.status, JSON.stringify(body)).toBe(200);
      const items = ((await search.json()) as { items: { key: string; value: unknown }[] }).items;
      const keys = items
        .filter((item) => item.key === 'old' || item.key === 'plain')
        .map((item) => item.key)
        .sort();
      expect(keys, JSON.stringify(body)).toEqual(body.filter === undefined ? ['old', 'plain'] : ['plain']);
      const old = items.find((item) => item.key === 'old');
      if (old !== undefined) expect(jsonDepth(old.value)).toBe(STORED_DEPTH);
    }
    const read = await asAlpha(factPath('stored/deep', 'old'));
    expect(read.status).toBe(200);
    expect(jsonDepth(((await read.json()) as { value: unknown }).value)).toBe(STORED_DEPTH);
    const namespaces = await asAlpha('/api/memory/namespaces?prefix=stored');
    expect(namespaces.status).toBe(200);
    expect(await namespaces.json()).toMatchObject({ namespaces: [['stored', 'deep']] });
  });

  it('refuses keys, prefixes and names with Unicode noncharacters or control characters, and writes nothing', async () => {
    for (const encoded of ['%EF%BF%BF', '%EF%BF%BE', '%EF%B7%90', '%F0%9F%BF%BF', '%F4%8F%BF%BE']) {
      const put = await asAlpha(`/api/kv/probe/a${encoded}b`, { method: 'PUT', body: 'x' });
      await expectRefused(put, 'key');
      const append = await asAlpha(`/api/kv/probe/${encoded}`, { method: 'POST', body: 'x' });
      await expectRefused(append, 'key');
      await expectRefused(await asAlpha(`/api/keys?prefix=probe/${encoded}`), 'prefix');
      await expectRefused(
        await asAlpha(factPath(`probe/${decodeURIComponent(encoded)}`, 'k'), { method: 'GET' }),
        'namespace',
      );
      const fact = await sendJson(
        asAlpha,
        factPath('probe', `k${decodeURIComponent(encoded)}`),
        'PUT',
        '{"value":1}',
      );
      await expectRefused(fact, 'key');
    }
    for (const prefix of ['%00', '%1F', '/', 'probe//', 'probe/../']) {
      await expectRefused(await asAlpha(`/api/keys?prefix=${prefix}`), 'prefix');
    }
    const listed = await asAlpha('/api/keys');
    expect(listed.status).toBe(200);
    expect(await listed.json()).toEqual({ keys: [], cursor: null });
    const search = await sendJson(
      asAlpha,
      '/api/memory/search',
      'POST',
      JSON.stringify({ namespace: 'probe' }),
    );
    expect(((await search.json()) as { items: unknown[] }).items).toEqual([]);

    // A prefix may end with "/" or inside a segment, "." included.
    expect((await asAlpha('/api/kv/probe/.hidden', { method: 'PUT', body: 'x' })).status).toBe(201);
    for (const prefix of ['probe', 'probe/', 'probe/.', 'probe/.hi']) {
      const page = await asAlpha(`/api/keys?prefix=${encodeURIComponent(prefix)}`);
      expect(page.status, prefix).toBe(200);
      expect(await page.json()).toEqual({ keys: ['probe/.hidden'], cursor: null });
    }
  });
});
