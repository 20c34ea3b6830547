import { randomBytes } from 'node:crypto';
import {
  appendFile,
  lstat,
  mkdir,
  readdir,
  readFile,
  rm,
  symlink,
  truncate,
  writeFile,
} from 'node:fs/promises';
import path from 'node:path';

import { ArchiveClient, StaleCheckpointError } from '@cairn-state/client';
import { CairnHttpError } from '@cairn-state/client';
import { type HttpSender, nodeHttpSender } from '@cairn-state/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { BLOCK_BYTES } from '../../shared/protocol/archive/identifiers';
import {
  apiKeysSetting,
  type Backend,
  backendSettings,
  newTenant,
  type RunningApp,
  startApp,
} from '../support/app';
import { azurite } from '../support/azurite';
import { tempDir } from '../support/cleanup';
import { runCairn } from '../support/cli';
import { sessionIndexSettings } from '../support/tables';

/**
 * The archive client and the `cairn checkpoint` CLI against the real app over HTTP: incremental
 * publishes (requests counted by a wrapper around the real sender), new generations for rewritten
 * or shrunk files, restores verified byte for byte, retries through a flaky network.
 */

const MiB = 1024 * 1024;

/**
 * The client's real sender, counting requests by method; `failEvery` makes every n-th request a
 * network error before it is sent.
 */
function countingSender(failEvery = 0) {
  const counts = { GET: 0, PUT: 0, POST: 0, failed: 0 };
  const real = nodeHttpSender();
  let sent = 0;
  const send: HttpSender = async (request) => {
    counts[request.method as 'GET' | 'PUT' | 'POST']++;
    if (failEvery > 0 && ++sent % failEvery === 0) {
      counts.failed++;
      throw new Error('socket hang up (injected)');
    }
    return real(request);
  };
  return { counts, send };
}

async function newSessionDir(files: Record<string, Buffer>): Promise<string> {
  const dir = tempDir('session');
  for (const [name, bytes] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(dir, name)), { recursive: true });
    await writeFile(path.join(dir, name), bytes);
  }
  return dir;
}

async function expectSameTree(restored: string, original: Record<string, Buffer>): Promise<void> {
  for (const [name, bytes] of Object.entries(original)) {
    expect((await readFile(path.join(restored, name))).equals(bytes), name).toBe(true);
  }
}

/** A folder path that does not exist yet (restore wants an empty or absent target). */
const restoreTarget = () => path.join(tempDir('restore'), 'target');

describe.each<Backend>(['local', 'blob'])('archive client on the %s backend', (backend) => {
  const tenant = newTenant('agent');
  const other = newTenant('other');
  const settings = backendSettings(backend, azurite().blobEndpoint);
  let app: RunningApp;
  const client = (send?: HttpSender) =>
    new ArchiveClient({ url: app.url, token: tenant.key, ...(send === undefined ? {} : { send }) });
  const sessionId = (name: string) => `${name}-${randomBytes(4).toString('hex')}`;

  beforeAll(async () => {
    app = await startApp({
      CAIRN_API_KEYS: apiKeysSetting([tenant, other]),
      ...settings,
      ...sessionIndexSettings(azurite().tableEndpoint),
    });
  });
  afterAll(async () => {
    await app?.stop();
  });

  // 64 MiB on the local backend; a smaller file on Azurite keeps the run short.
  const bigSize = backend === 'local' ? 64 * MiB : 8 * MiB + 321;

  it(`publishes ${bigSize} bytes, then after a 1 KiB append uploads at most 2 objects plus the manifest`, async () => {
    const events = randomBytes(bigSize);
    const dir = await newSessionDir({ 'events.jsonl': events });
    const sid = sessionId('big');
    const first = countingSender();
    const report = await client(first.send).publishCheckpoint(dir, sid, { data: { turn: 1 } });
    const objects = Math.ceil(bigSize / BLOCK_BYTES);
    expect(first.counts.PUT).toBe(objects);
    expect(report).toMatchObject({ parent: null, files: 1, objectsUploaded: objects });

    const line = Buffer.from(`${'x'.repeat(1023)}\n`);
    await appendFile(path.join(dir, 'events.jsonl'), line);
    const second = countingSender();
    const incremental = await client(second.send).publishCheckpoint(dir, sid);
    expect(incremental.parent).toBe(report.checkpointId);
    // Counted at the sender: the new tail (plus a block, had the append completed one), one manifest.
    expect(second.counts.PUT).toBeGreaterThanOrEqual(1);
    expect(second.counts.PUT).toBeLessThanOrEqual(2);
    expect(incremental.objectsUploaded).toBe(second.counts.PUT);
    expect(second.counts.POST).toBe(1);

    const restored = restoreTarget();
    const restore = await client().restoreCheckpoint(sid, restored);
    expect(restore).toMatchObject({ checkpointId: incremental.checkpointId, files: 1 });
    await expectSameTree(restored, { 'events.jsonl': Buffer.concat([events, line]) });
    // The previous checkpoint is still there, exactly.
    const older = restoreTarget();
    await client().restoreCheckpoint(sid, older, { checkpointId: report.checkpointId });
    await expectSameTree(older, { 'events.jsonl': events });
    await Promise.all([dir, restored, older].map((d) => rm(d, { recursive: true, force: true })));
  });

  it('starts a new generation for a rewritten or shrunk file and restores every version exactly', async () => {
    const original = randomBytes(5 * BLOCK_BYTES + 100);
    const dir = await newSessionDir({ 'events.jsonl': original });
    const sid = sessionId('rewrite');
    const archive = client();
    await archive.publishCheckpoint(dir, sid);
    const g1 = (await archive.readManifest(sid)).files[0]?.generation;

    // Rewritten in its first block, same length: every block goes up again under a new generation.
    const rewritten = Buffer.from(original);
    rewritten[10] = (rewritten[10] ?? 0) ^ 0xff;
    await writeFile(path.join(dir, 'events.jsonl'), rewritten);
    const counted = countingSender();
    await client(counted.send).publishCheckpoint(dir, sid);
    expect(counted.counts.PUT).toBe(6);
    const g2 = (await archive.readManifest(sid)).files[0]?.generation;
    expect(g2).not.toBe(g1);

    // Shrunk: a new generation too.
    await truncate(path.join(dir, 'events.jsonl'), 2 * BLOCK_BYTES + 5);
    await archive.publishCheckpoint(dir, sid);
    const shrunk = (await archive.readManifest(sid)).files[0];
    expect(shrunk?.generation).not.toBe(g2);
    expect(shrunk?.size).toBe(2 * BLOCK_BYTES + 5);

    const restored = restoreTarget();
    await archive.restoreCheckpoint(sid, restored);
    await expectSameTree(restored, { 'events.jsonl': rewritten.subarray(0, 2 * BLOCK_BYTES + 5) });
    await Promise.all([dir, restored].map((d) => rm(d, { recursive: true, force: true })));
  });

  it('continues incrementally from a restored directory, and refuses to restore into a non-empty one', async () => {
    const events = randomBytes(4 * BLOCK_BYTES + 1);
    const dir = await newSessionDir({ 'events.jsonl': events });
    const sid = sessionId('resume');
    await client().publishCheckpoint(dir, sid);

    const restored = restoreTarget();
    await client().restoreCheckpoint(sid, restored);
    await appendFile(path.join(restored, 'events.jsonl'), 'more\n');
    const counted = countingSender();
    await client(counted.send).publishCheckpoint(restored, sid);
    expect(counted.counts.PUT).toBe(1);

    const occupied = await newSessionDir({ 'keep.txt': Buffer.from('mine') });
    await expect(client().restoreCheckpoint(sid, occupied)).rejects.toThrow(/not empty/);
    expect(await readdir(occupied)).toEqual(['keep.txt']);
    // A folder holding only a link, and a link to an empty folder: refused, nothing written through.
    const outside = tempDir('outside');
    const holdsLink = tempDir('holds-link');
    await symlink(outside, path.join(holdsLink, 'events.jsonl'));
    await expect(client().restoreCheckpoint(sid, holdsLink)).rejects.toThrow(/not empty/);
    const linked = path.join(tempDir('parent'), 'linked');
    await symlink(outside, linked);
    await expect(client().restoreCheckpoint(sid, linked)).rejects.toThrow(/is a symbolic link/);
    expect(await readdir(outside)).toEqual([]);
    expect((await lstat(linked)).isSymbolicLink()).toBe(true);
    await Promise.all([dir, restored, occupied].map((d) => rm(d, { recursive: true, force: true })));
  });

  it('completes a publish and a restore through a network that drops every 7th request', async () => {
    const files = { 'events.jsonl': randomBytes(20 * BLOCK_BYTES + 3), 'native/a': randomBytes(10) };
    const dir = await newSessionDir(files);
    const sid = sessionId('flaky');
    const flaky = countingSender(7);
    await client(flaky.send).publishCheckpoint(dir, sid);
    const restored = restoreTarget();
    await client(countingSender(7).send).restoreCheckpoint(sid, restored);
    expect(flaky.counts.failed).toBeGreaterThan(0);
    await expectSameTree(restored, files);
    await Promise.all([dir, restored].map((d) => rm(d, { recursive: true, force: true })));
  });

  it('tells a stale publisher the latest checkpoint', async () => {
    const dir = await newSessionDir({ 'events.jsonl': randomBytes(100) });
    const sid = sessionId('stale');
    const first = await client().publishCheckpoint(dir, sid);
    await appendFile(path.join(dir, 'events.jsonl'), 'x');
    const error = await client()
      .publishCheckpoint(dir, sid, { parent: null })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StaleCheckpointError);
    expect((error as StaleCheckpointError).latest).toBe(first.checkpointId);
    await rm(dir, { recursive: true, force: true });
  });

  it("stops at the first refusal: another tenant's publish sends a handful of blocks, not all", async () => {
    const dir = await newSessionDir({ 'events.jsonl': randomBytes(40 * BLOCK_BYTES) });
    const sid = sessionId('taken');
    await client().publishCheckpoint(dir, sid);
    const counted = countingSender();
    const intruder = new ArchiveClient({
      url: app.url,
      token: other.key,
      concurrency: 2,
      send: counted.send,
    });
    // Its own folder (no upload state), so that it has every block to send.
    const own = await newSessionDir({ 'events.jsonl': randomBytes(40 * BLOCK_BYTES) });
    const error = await intruder.publishCheckpoint(own, sid).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CairnHttpError);
    expect((error as CairnHttpError).status).toBe(403);
    expect(counted.counts.PUT).toBeLessThanOrEqual(3);
    expect(counted.counts.POST).toBe(0);
    await expect(client().publishCheckpoint(await newSessionDir({}), sid)).rejects.toThrow(
      /nothing to publish/,
    );
    await rm(dir, { recursive: true, force: true });
  });

  it('runs as `cairn checkpoint publish|restore` with CAIRN_URL and CAIRN_KEY', async () => {
    const files = { 'events.jsonl': randomBytes(2 * BLOCK_BYTES + 9), 'native/x/y.json': Buffer.from('{}') };
    const dir = await newSessionDir(files);
    const sid = sessionId('cli');
    const env = { PATH: process.env['PATH'] ?? '', CAIRN_URL: app.url, CAIRN_KEY: tenant.key };
    const published = await runCairn(
      ['checkpoint', 'publish', dir, '--session', sid, '--data', '{"turn":3}'],
      env,
    );
    expect(published.code, published.stderr).toBe(0);
    const report = JSON.parse(published.stdout) as { checkpointId: string; objectsUploaded: number };
    expect(report.objectsUploaded).toBe(4);

    const restored = restoreTarget();
    const restore = await runCairn(['checkpoint', 'restore', '--session', sid, restored], env);
    expect(restore.code, restore.stderr).toBe(0);
    expect(JSON.parse(restore.stdout)).toMatchObject({ checkpointId: report.checkpointId, files: 2 });
    await expectSameTree(restored, files);

    // Another tenant's key: its publish to this session is refused, its restore finds nothing.
    const otherEnv = { ...env, CAIRN_KEY: other.key };
    const refused = await runCairn(['checkpoint', 'publish', dir, '--session', sid], otherEnv);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('tenant mismatch');
    const hidden = await runCairn(['checkpoint', 'restore', '--session', sid, restoreTarget()], otherEnv);
    expect(hidden.code).toBe(1);
    expect(hidden.stderr).toContain('404');

    expect((await runCairn(['checkpoint', 'publish', dir], env)).code).toBe(2);
    expect((await runCairn(['checkpoint', 'publish', dir, '--session', sid], { PATH: env.PATH })).code).toBe(
      2,
    );
    await Promise.all([dir, restored].map((d) => rm(d, { recursive: true, force: true })));
  });
});
