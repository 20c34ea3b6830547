import { spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { copyFileSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

import { BlobServiceClient, StorageSharedKeyCredential } from '@azure/storage-blob';
import { afterEach, describe, expect, it } from 'vitest';

import { AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY } from '../../dev/azurite';
import { sealedKeyId } from '../../shared/crypto/sealedFormat';
import { keyDigest, segmentDigests } from '../../shared/memory/layout';
import { BLOCK_BYTES } from '../../shared/protocol/archive/identifiers';
import { tenantContainerName } from '../../shared/storage/azure/blobKeyValueStore';
import { rowKeyOf } from '../../shared/storage/azure/tableMemoryStore';
import {
  apiKeysSetting,
  type Backend,
  backendSettings,
  client,
  newTenant,
  type RunningApp,
  startApp,
} from '../support/app';
import { splitFile } from '../support/archiveTestKit';
import { azurite } from '../support/azurite';
import { azuriteTable, memoryTableSettings, sessionIndexSettings } from '../support/tables';

/**
 * Encryption at rest end to end (docs/encryption.md), on both backends (memory facts in local
 * files, or in Table Storage beside Blob): what reaches the disk or Azurite holds no plaintext of a
 * value; bytes moved to another place fail with integrity_error; a key rotation (new first key,
 * rewrap, old key removed) loses nothing; the app refuses to start on keys its data was not
 * written with.
 */

const CLI = path.resolve('client/cli/dist/cjs/bin.js');
const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64');
const keyText = (id: string, material: Buffer) => `${id}:${material.toString('hex')}`;

type Call = ReturnType<typeof client>;

/** Every file under `folder`, by its path relative to `root` (`/`-separated). */
function filesUnder(root: string, folder: string): Map<string, Buffer> {
  const files = new Map<string, Buffer>();
  const walk = (current: string) => {
    for (const name of readdirSync(current)) {
      const full = path.join(current, name);
      if (statSync(full).isDirectory()) walk(full);
      else files.set(path.relative(root, full).split(path.sep).join('/'), readFileSync(full));
    }
  };
  walk(folder);
  return files;
}

/**
 * Every stored byte of the app's data: files under the data folder, or blobs of its containers and
 * the entities of its memory table. A memory fact's stored value is listed on its own too (`#value`:
 * the local file holds it in base64, the table as a binary property), so that it is checked as the
 * bytes the storage keeps.
 */
async function storedObjects(settings: Record<string, string>): Promise<Map<string, Buffer>> {
  const objects = new Map<string, Buffer>();
  const dir = settings['CAIRN_DATA_DIR'];
  if (dir !== undefined) {
    for (const [relative, bytes] of filesUnder(dir, dir)) {
      objects.set(relative, bytes);
      if (relative.startsWith('memory/')) {
        const { value } = JSON.parse(bytes.toString()) as { value: string };
        objects.set(`${relative}#value`, Buffer.from(value, 'base64'));
      }
    }
    return objects;
  }
  const base = settings['CAIRN_BLOB_CONTAINER'] ?? '';
  const service = blobService();
  for await (const container of service.listContainers({ prefix: `${base}-` })) {
    const client = service.getContainerClient(container.name);
    for await (const blob of client.listBlobsFlat()) {
      objects.set(`${container.name}/${blob.name}`, await client.getBlobClient(blob.name).downloadToBuffer());
    }
  }
  const memory = memoryTable(settings);
  for await (const entity of memory.listEntities<Record<string, unknown>>()) {
    const name = `${memory.tableName}/${entity.partitionKey}/${entity.rowKey}`;
    const value = entity['value'];
    const text = JSON.stringify({ ...entity, value: undefined }, (_key, property: unknown) =>
      typeof property === 'bigint' ? String(property) : property,
    );
    // Rows without a value (the search cache's change feed) are scanned as their properties.
    if (!(value instanceof Uint8Array)) {
      objects.set(name, Buffer.from(text));
      continue;
    }
    objects.set(name, Buffer.concat([Buffer.from(text), value]));
    objects.set(`${name}#value`, Buffer.from(value));
  }
  return objects;
}

function memoryTable(settings: Record<string, string>) {
  return azuriteTable(azurite().tableEndpoint, settings['CAIRN_MEMORY_TABLE']);
}

/** The app's settings for `backend`: with Blob, memory facts on a fresh table of Azurite. */
function storageSettings(backend: Backend): Record<string, string> {
  const settings = backendSettings(backend, azurite().blobEndpoint);
  return backend === 'local' ? settings : { ...settings, ...memoryTableSettings(azurite().tableEndpoint) };
}

type FactPlace = readonly [tenant: string, namespace: string, key: string];

/** Puts the stored value of one memory fact in another fact's place, maybe another tenant's (an attacker's move). */
async function moveStoredFact(settings: Record<string, string>, from: FactPlace, to: FactPlace) {
  const dir = settings['CAIRN_DATA_DIR'];
  if (dir !== undefined) {
    const file = ([tenant, namespace, key]: FactPlace) =>
      path.join(dir, 'memory', tenant, ...segmentDigests(namespace), `${keyDigest(key)}.json`);
    const source = JSON.parse(readFileSync(file(from), 'utf8')) as { value: string };
    const target = JSON.parse(readFileSync(file(to), 'utf8')) as { value: string };
    writeFileSync(file(to), JSON.stringify({ ...target, value: source.value }));
    return;
  }
  const table = memoryTable(settings);
  const source = await table.getEntity<{ value: Uint8Array }>(from[0], rowKeyOf(from[1], from[2]));
  await table.updateEntity(
    { partitionKey: to[0], rowKey: rowKeyOf(to[1], to[2]), value: source.value },
    'Merge',
  );
}

async function remember(call: Call, namespace: string, key: string, value: unknown) {
  const query = new URLSearchParams({ namespace, key }).toString();
  const response = await call(`/api/memory/facts?${query}`, {
    method: 'PUT',
    body: JSON.stringify({ value }),
  });
  expect([200, 201]).toContain(response.status);
}

async function recall(call: Call, namespace: string, key: string): Promise<Response> {
  return call(`/api/memory/facts?${new URLSearchParams({ namespace, key }).toString()}`);
}

async function recalled(call: Call, namespace: string, key: string): Promise<unknown> {
  const response = await recall(call, namespace, key);
  expect(response.status).toBe(200);
  return ((await response.json()) as { value: unknown }).value;
}

function blobService(): BlobServiceClient {
  return new BlobServiceClient(
    azurite().blobEndpoint,
    new StorageSharedKeyCredential(AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY),
  );
}

/** Copies the stored bytes of one key/value key of `tenant` over another key (an attacker's move). */
async function moveStoredValue(settings: Record<string, string>, tenant: string, from: string, to: string) {
  const dir = settings['CAIRN_DATA_DIR'];
  if (dir !== undefined) {
    copyFileSync(path.join(dir, 'kv', tenant, from), path.join(dir, 'kv', tenant, to));
    return;
  }
  const container = blobService().getContainerClient(
    tenantContainerName(settings['CAIRN_BLOB_CONTAINER'] ?? '', tenant),
  );
  const bytes = await container.getBlobClient(from).downloadToBuffer();
  await container.getBlockBlobClient(to).upload(bytes, bytes.length);
}

/** The stored (sealed) bytes of a key/value key of `tenant`, as an attacker with storage access reads them. */
async function storedValue(settings: Record<string, string>, tenant: string, key: string): Promise<Buffer> {
  const dir = settings['CAIRN_DATA_DIR'];
  if (dir !== undefined) return readFileSync(path.join(dir, 'kv', tenant, key));
  const container = blobService().getContainerClient(
    tenantContainerName(settings['CAIRN_BLOB_CONTAINER'] ?? '', tenant),
  );
  return container.getBlobClient(key).downloadToBuffer();
}

/** Puts `bytes` back as the stored value of a key/value key of `tenant` (an attacker's rollback). */
async function putBackValue(settings: Record<string, string>, tenant: string, key: string, bytes: Buffer) {
  const dir = settings['CAIRN_DATA_DIR'];
  if (dir !== undefined) {
    const file = path.join(dir, 'kv', tenant, key);
    await rm(file, { force: true });
    await mkdir(path.dirname(file), { recursive: true });
    await writeFile(file, bytes);
    return;
  }
  const container = blobService().getContainerClient(
    tenantContainerName(settings['CAIRN_BLOB_CONTAINER'] ?? '', tenant),
  );
  await container.getBlockBlobClient(key).upload(bytes, bytes.length);
}

function checkpoint(id: string, parent: string | null, marker: string, version: number) {
  return JSON.stringify({
    checkpointId: id,
    parent,
    checkpoint: { type: 'json', data: b64({ v: 4, id }) },
    metadata: { note: marker },
    channelVersions: { messages: version },
    values: { messages: { type: 'json', data: b64([marker]) } },
  });
}

async function putThread(call: Call, thread: string, marker: string) {
  expect(
    (
      await call(`/api/threads/${thread}/checkpoints`, {
        method: 'POST',
        body: checkpoint('c1', null, marker, 1),
      })
    ).status,
  ).toBe(201);
  const writes = await call(`/api/threads/${thread}/checkpoints/c1/writes`, {
    method: 'POST',
    body: JSON.stringify({
      taskId: `task-${marker}`,
      writes: [{ channel: 'messages', idx: 0, type: 'json', data: b64(['w']) }],
    }),
  });
  expect(writes.status).toBe(200);
}

async function readThread(call: Call, thread: string, marker: string) {
  const response = await call(`/api/threads/${thread}/checkpoints/latest`);
  expect(response.status).toBe(200);
  const tuple = (await response.json()) as {
    metadata: { note: string };
    values: Record<string, { data: string }>;
    pendingWrites: { taskId: string }[];
  };
  expect(tuple.metadata.note).toBe(marker);
  expect(JSON.parse(Buffer.from(tuple.values['messages']?.data ?? '', 'base64').toString())).toEqual([
    marker,
  ]);
  expect(tuple.pendingWrites.map((write) => write.taskId)).toEqual([`task-${marker}`]);
}

function cairn(args: string[], env: Record<string, string>): Promise<{ code: number; stdout: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, ...args], {
      env: { PATH: process.env['PATH'] ?? '', ...env },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let stdout = '';
    child.stdout.on('data', (data: Buffer) => (stdout += data.toString()));
    child.once('exit', (code) => resolve({ code: code ?? -1, stdout }));
  });
}

interface RewrapStatus {
  status: string;
  report: { resealed: number; remaining: Record<string, number>; sealedWith: Record<string, number> } | null;
}

async function rewrap(call: Call): Promise<NonNullable<RewrapStatus['report']>> {
  const started = await call('/api/encryption/rewraps', { method: 'POST', body: '{}' });
  expect(started.status).toBe(202);
  const { id } = (await started.json()) as { id: string };
  for (;;) {
    const status = (await (await call(`/api/encryption/rewraps/${id}`)).json()) as RewrapStatus;
    if (status.status === 'failed') throw new Error(JSON.stringify(status));
    if (status.report !== null) return status.report;
    await sleep(100);
  }
}

/** `size` bytes of text repeating `marker`: any stored fragment of it would show the marker. */
function textOf(marker: string, size: number): Buffer {
  return Buffer.from(`${marker} `.repeat(Math.ceil(size / (marker.length + 1)))).subarray(0, size);
}

/** Uploads `bytes` as one file (generation `g-<checkpointId>`) and publishes the checkpoint. */
async function publishFile(
  call: Call,
  sessionId: string,
  checkpointId: string,
  parent: string | null,
  filePath: string,
  bytes: Buffer,
  data: Record<string, unknown>,
) {
  const { objects, file } = splitFile(filePath, bytes, `g-${checkpointId}`, checkpointId);
  for (const [key, object] of objects) {
    const put = await call(`/api/sessions/${sessionId}/objects/${key}`, { method: 'PUT', body: object });
    expect(put.status).toBe(201);
  }
  const published = await call(`/api/sessions/${sessionId}/checkpoints`, {
    method: 'POST',
    body: JSON.stringify({ checkpointId, parent, files: [file], data }),
    headers: { 'content-type': 'application/json' },
  });
  expect(published.status).toBe(201);
}

async function restored(call: Call, sessionId: string, checkpointId: string, filePath: string) {
  const response = await call(`/api/sessions/${sessionId}/checkpoints/${checkpointId}/files/${filePath}`);
  expect(response.status).toBe(200);
  return Buffer.from(await response.arrayBuffer());
}

/** Every stored byte of the session archives: their objects, and the session index's entities. */
async function storedArchive(settings: Record<string, string>): Promise<Map<string, Buffer>> {
  const dir = settings['CAIRN_DATA_DIR'];
  const objects = dir === undefined ? new Map<string, Buffer>() : filesUnder(dir, path.join(dir, 'sessions'));
  if (dir === undefined) {
    const container = blobService().getContainerClient(settings['CAIRN_BLOB_CONTAINER'] ?? '');
    for await (const blob of container.listBlobsFlat({ prefix: 'sessions/' })) {
      objects.set(blob.name, await container.getBlobClient(blob.name).downloadToBuffer());
    }
  }
  const index = azuriteTable(azurite().tableEndpoint, settings['CAIRN_SESSION_TABLE']);
  for await (const entity of index.listEntities<Record<string, unknown>>()) {
    objects.set(`index/${entity.partitionKey}/${entity.rowKey}`, Buffer.from(JSON.stringify(entity)));
  }
  return objects;
}

async function storedArchiveObject(settings: Record<string, string>, key: string): Promise<Buffer> {
  const dir = settings['CAIRN_DATA_DIR'];
  if (dir !== undefined) return readFileSync(path.join(dir, 'sessions', key));
  const container = blobService().getContainerClient(settings['CAIRN_BLOB_CONTAINER'] ?? '');
  return container.getBlobClient(`sessions/${key}`).downloadToBuffer();
}

/** Replaces the stored bytes of one archive object behind the app's back (an attacker's move). */
async function tamperArchive(settings: Record<string, string>, key: string, bytes: Buffer) {
  const dir = settings['CAIRN_DATA_DIR'];
  if (dir !== undefined) {
    const file = path.join(dir, 'sessions', key);
    await rm(file);
    await writeFile(file, bytes);
    return;
  }
  const container = blobService().getContainerClient(settings['CAIRN_BLOB_CONTAINER'] ?? '');
  await container.getBlockBlobClient(`sessions/${key}`).upload(bytes, bytes.length);
}

describe.each<Backend>(['local', 'blob'])('encryption at rest on the %s backend', (backend) => {
  const sealed = newTenant('sealed', true);
  const plain = newTenant('plain');
  let app: RunningApp | undefined;
  afterEach(async () => {
    await app?.stop();
    app = undefined;
  });

  it('refuses an older sealed value put back at the storage level in place of a newer one it saw', async () => {
    const settings = storageSettings(backend);
    app = await startApp({
      CAIRN_API_KEYS: apiKeysSetting([sealed]),
      CAIRN_ENCRYPTION_KEYS: keyText('k1', randomBytes(32)),
      CAIRN_ENCRYPT_TENANTS: sealed.tenant,
      ...settings,
    });
    const asSealed = client(app.url, sealed.key);
    expect((await asSealed('/api/kv/roll/back', { method: 'PUT', body: 'version 1' })).status).toBe(201);
    const first = await storedValue(settings, sealed.tenant, 'roll/back');
    expect((await asSealed('/api/kv/roll/back', { method: 'PUT', body: 'version 2' })).status).toBe(200);
    expect(await (await asSealed('/api/kv/roll/back')).text()).toBe('version 2');

    const refused = async () => {
      const response = await asSealed('/api/kv/roll/back');
      expect(response.status).toBe(500);
      const { error } = (await response.json()) as { error: { code: string; message: string } };
      expect(error.code).toBe('integrity_error');
      expect(error.message).toMatch(/roll\/back is an older version put back/);
    };
    await putBackValue(settings, sealed.tenant, 'roll/back', first);
    await refused();
    // An append opens the value too: refused, nothing written.
    expect((await asSealed('/api/kv/roll/back', { method: 'POST', body: '+' })).status).toBe(500);
    expect((await storedValue(settings, sealed.tenant, 'roll/back')).equals(first)).toBe(true);
    // A write of the caller replaces it; the old bytes stay refused, also after a deletion.
    expect((await asSealed('/api/kv/roll/back', { method: 'PUT', body: 'version 3' })).status).toBe(200);
    expect(await (await asSealed('/api/kv/roll/back')).text()).toBe('version 3');
    expect((await asSealed('/api/kv/roll/back', { method: 'DELETE' })).status).toBe(204);
    await putBackValue(settings, sealed.tenant, 'roll/back', first);
    await refused();
    // A value deleted and created again is a new version, never taken for a rollback.
    expect((await asSealed('/api/kv/roll/back', { method: 'DELETE' })).status).toBe(204);
    expect((await asSealed('/api/kv/roll/back', { method: 'PUT', body: 'version 4' })).status).toBe(201);
    expect(await (await asSealed('/api/kv/roll/back')).text()).toBe('version 4');
  });

  it('stores no plaintext of a value, answers it in plain, and refuses bytes moved to another key', async () => {
    const settings = storageSettings(backend);
    app = await startApp({
      CAIRN_API_KEYS: apiKeysSetting([sealed, plain]),
      CAIRN_ENCRYPTION_KEYS: keyText('k1', randomBytes(32)),
      CAIRN_ENCRYPT_TENANTS: sealed.tenant,
      ...settings,
    });
    const asSealed = client(app.url, sealed.key);
    const asPlain = client(app.url, plain.key);
    const marker = `MARKER${randomUUID().replaceAll('-', '')}`;
    const plainMarker = `PLAIN${randomUUID().replaceAll('-', '')}`;

    expect((await asSealed('/api/kv/notes/a', { method: 'PUT', body: `secret ${marker}` })).status).toBe(201);
    const appended = await asSealed('/api/kv/notes/a', { method: 'POST', body: ' and more' });
    expect(await appended.json()).toMatchObject({ size: `secret ${marker} and more`.length });
    expect((await asSealed('/api/kv/notes/b', { method: 'PUT', body: 'other' })).status).toBe(201);
    await putThread(asSealed, 't1', marker);
    expect((await asPlain('/api/kv/notes/a', { method: 'PUT', body: plainMarker })).status).toBe(201);
    // Threads and memory facts are sealed for every tenant, key/value values only for the listed ones.
    await putThread(asPlain, 't1', marker);
    await remember(asSealed, 'users/42', 'secret', { note: marker });
    await remember(asSealed, 'users/42', 'other', 'other fact');
    await remember(asPlain, 'users/42', 'secret', [marker]);

    const read = await asSealed('/api/kv/notes/a');
    expect(await read.text()).toBe(`secret ${marker} and more`);
    const head = await asSealed('/api/kv/notes/a', { method: 'HEAD' });
    expect(head.headers.get('content-length')).toBe(String(`secret ${marker} and more`.length));
    await readThread(asSealed, 't1', marker);
    await readThread(asPlain, 't1', marker);
    expect(await recalled(asSealed, 'users/42', 'secret')).toEqual({ note: marker });
    expect(await recalled(asPlain, 'users/42', 'secret')).toEqual([marker]);

    const objects = await storedObjects(settings);
    const holding = (text: string) =>
      [...objects].filter(([, bytes]) => bytes.includes(Buffer.from(text))).map(([name]) => name);
    expect(holding(marker)).toEqual([]);
    // The scan does see stored values: the plain tenant's key/value value is there as sent.
    expect(holding(plainMarker)).toHaveLength(1);
    const sealedNames = [...objects].filter(([, bytes]) => sealedKeyId(bytes) === 'k1');
    expect(sealedNames.length).toBeGreaterThanOrEqual(9);
    const factValues = [...objects].filter(([name]) => name.endsWith('#value'));
    expect(factValues).toHaveLength(3);
    expect(factValues.every(([, bytes]) => sealedKeyId(bytes) === 'k1')).toBe(true);

    await moveStoredValue(settings, sealed.tenant, 'notes/a', 'notes/b');
    const moved = await asSealed('/api/kv/notes/b');
    expect(moved.status).toBe(500);
    expect(((await moved.json()) as { error: { code: string } }).error.code).toBe('integrity_error');
    // Never taken for absent, and the value at its own key still reads.
    expect((await asSealed('/api/kv/notes/a')).status).toBe(200);

    // A memory fact's sealed value in another fact's place, and in another tenant's: refused.
    const secret = [sealed.tenant, 'users/42', 'secret'] as const;
    await moveStoredFact(settings, secret, [sealed.tenant, 'users/42', 'other']);
    await moveStoredFact(settings, secret, [plain.tenant, 'users/42', 'secret']);
    for (const [call, key] of [
      [asSealed, 'other'],
      [asPlain, 'secret'],
    ] as const) {
      const movedFact = await recall(call, 'users/42', key);
      expect(movedFact.status).toBe(500);
      expect(((await movedFact.json()) as { error: { code: string } }).error.code).toBe('integrity_error');
    }
    expect(await recalled(asSealed, 'users/42', 'secret')).toEqual({ note: marker });
  });

  it('rotates keys: a new first key seals, old values still open, rewrap, then the old key goes and nothing is lost', async () => {
    const settings = storageSettings(backend);
    const [k1, k2] = [randomBytes(32), randomBytes(32)];
    const start = (keys: string) =>
      startApp({
        CAIRN_API_KEYS: apiKeysSetting([sealed, plain]),
        CAIRN_ENCRYPTION_KEYS: keys,
        CAIRN_ENCRYPT_TENANTS: '*',
        ...settings,
      });
    app = await start(keyText('k1', k1));
    let asSealed = client(app.url, sealed.key);
    let asPlain = client(app.url, plain.key);
    await putThread(asSealed, 'old', 'before');
    await putThread(asPlain, 'old', 'before-plain');
    expect((await asPlain('/api/kv/kept', { method: 'PUT', body: 'kept value' })).status).toBe(201);
    for (let i = 0; i < 5; i++) await remember(asSealed, `notes/${i % 2}`, `old-${i}`, { i });
    await remember(asPlain, 'notes', 'old', 'plain tenant fact');
    await app.stop();

    app = await start(`${keyText('k2', k2)},${keyText('k1', k1)}`);
    asSealed = client(app.url, sealed.key);
    asPlain = client(app.url, plain.key);
    await readThread(asSealed, 'old', 'before');
    expect(await (await asPlain('/api/kv/kept')).text()).toBe('kept value');
    await putThread(asSealed, 'new', 'after');
    expect(await recalled(asSealed, 'notes/1', 'old-1')).toEqual({ i: 1 });
    await remember(asSealed, 'notes/0', 'old-0', 'rewritten');
    await remember(asSealed, 'notes', 'new', 'after');
    const ids = [...(await storedObjects(settings)).values()].map(sealedKeyId).filter((id) => id !== null);
    expect(new Set(ids)).toEqual(new Set(['k1', 'k2']));
    const factKeys = async () =>
      [...(await storedObjects(settings))]
        .filter(([name]) => name.endsWith('#value'))
        .map(([, bytes]) => sealedKeyId(bytes))
        .sort();
    expect(await factKeys()).toEqual(['k1', 'k1', 'k1', 'k1', 'k1', 'k2', 'k2']);

    // The CLI runs the job and prints its report (exit 0: nothing is left with k1).
    const cli = await cairn(['rewrap'], { CAIRN_URL: app.url, CAIRN_KEY: sealed.key });
    expect(cli.code).toBe(0);
    const report = JSON.parse(cli.stdout) as NonNullable<RewrapStatus['report']>;
    expect(report.remaining).toEqual({ k1: 0 });
    expect(report.sealedWith['k1']).toBeGreaterThan(0);
    expect(report.resealed).toBe(report.sealedWith['k1']);
    // Idempotent: run again, it re-seals nothing.
    const again = await rewrap(asSealed);
    expect(again.resealed).toBe(0);
    expect(again.remaining).toEqual({ k1: 0 });
    await app.stop();

    app = await start(keyText('k2', k2));
    asSealed = client(app.url, sealed.key);
    asPlain = client(app.url, plain.key);
    await readThread(asSealed, 'old', 'before');
    await readThread(asPlain, 'old', 'before-plain');
    await readThread(asSealed, 'new', 'after');
    expect(await (await asPlain('/api/kv/kept')).text()).toBe('kept value');
    for (const i of [1, 2, 3, 4])
      expect(await recalled(asSealed, `notes/${i % 2}`, `old-${i}`)).toEqual({ i });
    expect(await recalled(asSealed, 'notes/0', 'old-0')).toBe('rewritten');
    expect(await recalled(asSealed, 'notes', 'new')).toBe('after');
    expect(await recalled(asPlain, 'notes', 'old')).toBe('plain tenant fact');
    expect(await factKeys()).toEqual(['k2', 'k2', 'k2', 'k2', 'k2', 'k2', 'k2']);
    const left = [...(await storedObjects(settings)).values()].map(sealedKeyId).filter((id) => id !== null);
    expect(new Set(left)).toEqual(new Set(['k2']));
    expect(await rewrap(asSealed)).toMatchObject({ resealed: 0, remaining: {} });
  });

  it('seals the session archives of a tenant whose policy asks: no plaintext stored, restores byte for byte, moved bytes refused, a key rotation loses nothing', async () => {
    const settings = {
      ...backendSettings(backend, azurite().blobEndpoint),
      ...sessionIndexSettings(azurite().tableEndpoint),
      ...memoryTableSettings(azurite().tableEndpoint),
    };
    const [k1, k2] = [randomBytes(32), randomBytes(32)];
    const start = (keys: string) =>
      startApp({
        CAIRN_API_KEYS: apiKeysSetting([sealed, plain]),
        CAIRN_ENCRYPTION_KEYS: keys,
        CAIRN_ENCRYPT_TENANTS: sealed.tenant,
        ...settings,
      });
    app = await start(keyText('k1', k1));
    let asSealed = client(app.url, sealed.key);
    const asPlainAt = (running: RunningApp) => client(running.url, plain.key);
    const marker = `MARKER${randomUUID().replaceAll('-', '')}`;
    const plainMarker = `PLAIN${randomUUID().replaceAll('-', '')}`;
    const secret = textOf(marker, 2 * BLOCK_BYTES + 500);
    await publishFile(asSealed, 'arch', 'c1', null, 'notes/secret.txt', secret, { note: marker });
    await publishFile(asPlainAt(app), 'parch', 'c1', null, 'notes/open.txt', textOf(plainMarker, 100), {
      note: plainMarker,
    });
    expect(await restored(asSealed, 'arch', 'c1', 'notes/secret.txt')).toEqual(secret);
    const listed = (await (await asSealed('/api/sessions')).json()) as { sessions: { data: unknown }[] };
    expect(listed.sessions.map((session) => session.data)).toEqual([{ note: marker }]);

    const stored = await storedArchive(settings);
    const holding = (text: string) =>
      [...stored].filter(([, bytes]) => bytes.includes(Buffer.from(text))).map(([name]) => name);
    expect(holding(marker)).toEqual([]);
    expect(holding('notes/secret.txt')).toEqual([]);
    // The scan does see stored content: the plain tenant's tail, manifest and index record hold it.
    expect(holding(plainMarker)).toHaveLength(3);
    const sealedObjects = [...stored].filter(([name]) => name.startsWith('sessions/arch/'));
    expect(
      sealedObjects.map(([name, bytes]) => [name.slice(name.indexOf('arch/')), sealedKeyId(bytes)]).sort(),
    ).toEqual([
      ['arch/blocks/g-c1/0', 'k1'],
      ['arch/blocks/g-c1/1', 'k1'],
      ['arch/checkpoints/c1', 'k1'],
      ['arch/latest', null],
      ['arch/tails/c1/g-c1', 'k1'],
    ]);

    // Bytes of one object moved over another: 500 integrity_error, never the bytes, never 404.
    await tamperArchive(
      settings,
      'arch/blocks/g-c1/0',
      await storedArchiveObject(settings, 'arch/blocks/g-c1/1'),
    );
    for (const route of [
      '/api/sessions/arch/objects/blocks/g-c1/0',
      '/api/sessions/arch/checkpoints/c1/files/notes/secret.txt',
    ]) {
      const moved = await asSealed(route);
      expect(moved.status, route).toBe(500);
      expect(((await moved.json()) as { error: { code: string } }).error.code).toBe('integrity_error');
    }
    await tamperArchive(
      settings,
      'arch/blocks/g-c1/0',
      sealedObjects.find(([name]) => name.endsWith('arch/blocks/g-c1/0'))?.[1] ?? Buffer.alloc(0),
    );
    expect(await restored(asSealed, 'arch', 'c1', 'notes/secret.txt')).toEqual(secret);
    await app.stop();

    // A new first key: old objects still open, new ones are sealed with it; rewrap; the old key goes.
    app = await start(`${keyText('k2', k2)},${keyText('k1', k1)}`);
    asSealed = client(app.url, sealed.key);
    expect(await restored(asSealed, 'arch', 'c1', 'notes/secret.txt')).toEqual(secret);
    const later = textOf(marker, BLOCK_BYTES + 9);
    await publishFile(asSealed, 'arch', 'c2', 'c1', 'notes/later.txt', later, { note: 'later' });
    const keyIds = async () =>
      [...(await storedArchive(settings))]
        .filter(([name]) => name.startsWith('sessions/arch/'))
        .map(([, bytes]) => sealedKeyId(bytes))
        .filter((id) => id !== null)
        .sort();
    expect(await keyIds()).toEqual(['k1', 'k1', 'k1', 'k1', 'k2', 'k2', 'k2']);
    const report = await rewrap(asSealed);
    expect(report.remaining).toEqual({ k1: 0 });
    // The four archive objects of c1 were sealed with k1 (c2's and the index record with k2).
    expect(report.sealedWith).toEqual({ k1: 4, k2: 4 });
    expect(report.resealed).toBe(4);
    expect(await keyIds()).toEqual(Array(7).fill('k2'));
    await app.stop();

    app = await start(keyText('k2', k2));
    asSealed = client(app.url, sealed.key);
    expect(await restored(asSealed, 'arch', 'c1', 'notes/secret.txt')).toEqual(secret);
    expect(await restored(asSealed, 'arch', 'c2', 'notes/later.txt')).toEqual(later);
    expect(await restored(asPlainAt(app), 'parch', 'c1', 'notes/open.txt')).toEqual(textOf(plainMarker, 100));
    const session = (await (await asSealed('/api/sessions/arch')).json()) as { data: unknown };
    expect(session.data).toEqual({ note: 'later' });
  });

  it('refuses to start on unreadable keys, without keys once data was sealed, or on keys the data was not written with', async () => {
    const settings = backendSettings(backend, azurite().blobEndpoint);
    const k1 = randomBytes(32);
    const start = (keys: string, policy: Record<string, string> = {}) =>
      startApp({
        CAIRN_API_KEYS: apiKeysSetting([sealed]),
        CAIRN_ENCRYPTION_KEYS: keys,
        ...policy,
        ...settings,
      });
    const refusal = async (keys: string, policy: Record<string, string> = {}) => {
      const error = await start(keys, policy).then(
        async (started) => {
          await started.stop();
          return new Error('the app started');
        },
        (caught: unknown) => caught as Error,
      );
      expect(error.message).toMatch(/^app exited \(1\)/);
      return /Cairn cannot start: (.*)/.exec(error.message)?.[1] ?? '';
    };
    expect(await refusal(`k1:${'x'.repeat(64)}`)).toMatch(
      /^CAIRN_ENCRYPTION_KEYS: entry 1: expected <id>:<64 hex/,
    );
    expect(await refusal(`k1:${k1.toString('hex')},k1:${randomBytes(32).toString('hex')}`)).toMatch(
      /^CAIRN_ENCRYPTION_KEYS: entry 2: the key id k1 is listed twice/,
    );
    app = await start(keyText('k1', k1));
    await putThread(client(app.url, sealed.key), 't', 'x');
    await app.stop();
    expect(await refusal('')).toMatch(
      /^CAIRN_ENCRYPTION_KEYS: is empty, but data was written with encryption keys \(ids k1\)/,
    );
    expect(await refusal(keyText('k9', randomBytes(32)))).toMatch(/none of the configured keys \(ids k9\)/);
    expect(await refusal(keyText('k1', randomBytes(32)))).toMatch(
      /key k1 is not the key data was written with/,
    );
    app = await start(keyText('k1', k1));
    await readThread(client(app.url, sealed.key), 't', 'x');
    await app.stop();
    // A tenant whose key/value values were sealed cannot be taken off CAIRN_ENCRYPT_TENANTS.
    app = await start(keyText('k1', k1), { CAIRN_ENCRYPT_TENANTS: sealed.tenant });
    expect((await client(app.url, sealed.key)('/api/kv/a', { method: 'PUT', body: 'sealed' })).status).toBe(
      201,
    );
    await app.stop();
    expect(await refusal(keyText('k1', k1))).toBe(
      `CAIRN_ENCRYPT_TENANTS: does not list tenant ${sealed.tenant}, whose key/value values or session archives are sealed; list it again (sealing cannot be turned off for a tenant)`,
    );
    app = await start(keyText('k1', k1), { CAIRN_ENCRYPT_TENANTS: '*' });
    expect(await (await client(app.url, sealed.key)('/api/kv/a')).text()).toBe('sealed');
  });
});
