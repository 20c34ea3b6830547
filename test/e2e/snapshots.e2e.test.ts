import { createHash, randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { lstat, readdir, readFile, readlink, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';

import { BlobServiceClient, StorageSharedKeyCredential } from '@azure/storage-blob';
import type { HttpSender } from '@cairn-state/client';
import {
  CairnClient,
  CairnHttpError,
  MissingPartsError,
  type SnapshotsClient,
  StaleParentError,
} from '@cairn-state/client';
import { loadSnapshot } from '@cairn-state/client';
import { saveSnapshot } from '@cairn-state/client';
import { verifySnapshot } from '@cairn-state/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY } from '../../dev/azurite';
import { PART_BYTES } from '../../shared/protocol/snapshots/identifiers';
import { MANIFEST_VERSION, serializeManifest } from '../../shared/protocol/snapshots/manifest';
import {
  apiKeysSetting,
  type Backend,
  backendSettings,
  checkedSender,
  client,
  newTenant,
  type RunningApp,
  startApp,
} from '../support/app';
import { azurite } from '../support/azurite';
import { tempDir } from '../support/cleanup';
import { runCairn } from '../support/cli';
import { buildSnapshot, newKeyPair, rawBase64, sha256, signedRaw } from '../support/snapshotTestKit';

/**
 * Signed workspace snapshots over real HTTP, against the app served by the local runtime, on both
 * backends: the client library and the `cairn` command save and load real folders (modes, both
 * kinds of symlink); damage of every kind is refused with the target untouched; tenants are apart.
 */

type Caller = ReturnType<typeof client>;

interface ErrorBody {
  code: string;
  message: string;
  [detail: string]: unknown;
}

async function errorOf(response: Response): Promise<ErrorBody> {
  expect(response.headers.get('content-type')).toContain('application/json');
  return ((await response.json()) as { error: ErrorBody }).error;
}

/**
 * A workspace with modes, an empty file, a file of two parts, two files of one content, symlinks to a
 * file, to a folder and to nothing. `a.txt` (15 bytes) is new content each time, so that damage done
 * to its part in one test touches no other test's snapshots (parts are shared by the tenant).
 */
function makeWorkspace(): { root: string; aTxt: Buffer } {
  const root = tempDir('workspace');
  const aTxt = Buffer.from(`alpha-${randomBytes(4).toString('hex')}\n`);
  const write = (relative: string, bytes: Buffer | string, mode: number) => {
    mkdirSync(path.dirname(path.join(root, relative)), { recursive: true });
    writeFileSync(path.join(root, relative), bytes);
    chmodSync(path.join(root, relative), mode);
  };
  write('a.txt', aTxt, 0o640);
  write('bin/run.sh', '#!/bin/sh\necho run\n', 0o755);
  write('data/big.bin', randomBytes(PART_BYTES + 17), 0o600);
  write('empty', '', 0o444);
  write('copy/of-a.txt', aTxt, 0o644);
  symlinkSync('a.txt', path.join(root, 'link-to-file'));
  symlinkSync('bin', path.join(root, 'link-to-dir'));
  symlinkSync('../a.txt', path.join(root, 'bin/up'));
  symlinkSync('nowhere', path.join(root, 'dangling'));
  return { root, aTxt };
}

/** Every entry below `root`: files with mode and SHA-256, symlinks with their target, folders. */
async function treeOf(root: string): Promise<Record<string, string>> {
  const tree: Record<string, string> = {};
  const walk = async (folder: string, prefix: string) => {
    for (const name of (await readdir(folder)).sort()) {
      const absolute = path.join(folder, name);
      const relative = prefix + name;
      const stat = await lstat(absolute);
      if (stat.isSymbolicLink()) tree[relative] = `link -> ${await readlink(absolute)}`;
      else if (stat.isDirectory()) {
        tree[relative] = 'folder';
        await walk(absolute, `${relative}/`);
      } else {
        tree[relative] = `file ${(stat.mode & 0o7777).toString(8)} ${sha256(await readFile(absolute))}`;
      }
    }
  };
  await walk(root, '');
  return tree;
}

/** A sender that counts requests by method and route kind. */
function countingSender(): { send: HttpSender; counts: () => { partPuts: number; publishes: number } } {
  const inner = checkedSender();
  let partPuts = 0;
  let publishes = 0;
  return {
    send: (request) => {
      if (request.method === 'PUT' && request.url.includes('/snapshots/objects/')) partPuts++;
      if (request.method === 'POST' && request.url.endsWith('/snapshots')) publishes++;
      return inner(request);
    },
    counts: () => ({ partPuts, publishes }),
  };
}

describe.each<Backend>(['local', 'blob'])('workspace snapshots on the %s backend', (backend) => {
  const alpha = newTenant('alpha');
  const beta = newTenant('beta');
  const ops = newTenant('ops', true);
  const key = newKeyPair();
  let app: RunningApp;
  let settings: Record<string, string>;
  let asAlpha: Caller;
  let asBeta: Caller;
  let asOps: Caller;
  let api: SnapshotsClient;
  /** The snapshot client of a caller; every answer it gets is checked against the OpenAPI document. */
  const snapshotsOf = (token: string, send: HttpSender = checkedSender()) =>
    new CairnClient({ url: app.url, token, send }).snapshots;

  beforeAll(async () => {
    settings = {
      CAIRN_API_KEYS: apiKeysSetting([alpha, beta, ops]),
      ...backendSettings(backend, azurite().blobEndpoint),
    };
    app = await startApp(settings);
    asAlpha = client(app.url, alpha.key);
    asBeta = client(app.url, beta.key);
    asOps = client(app.url, ops.key);
    api = snapshotsOf(alpha.key);
  });
  afterAll(async () => app.stop());

  /** Replaces (or, with null, removes) a stored object of a tenant's snapshots behind the app's back. */
  async function tamper(tenant: string, key: string, bytes: Buffer | null): Promise<void> {
    if (backend === 'local') {
      const file = path.join(settings['CAIRN_DATA_DIR'] ?? '', 'snapshots', tenant, ...key.split('/'));
      await rm(file, { force: true });
      if (bytes !== null) {
        mkdirSync(path.dirname(file), { recursive: true });
        await writeFile(file, bytes);
      }
      return;
    }
    const service = new BlobServiceClient(
      azurite().blobEndpoint,
      new StorageSharedKeyCredential(AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY),
    );
    const container = service.getContainerClient(settings['CAIRN_BLOB_CONTAINER'] ?? '');
    const hash = createHash('sha256').update(tenant).digest('hex').slice(0, 32);
    const blob = container.getBlockBlobClient(`snapshots/${hash}/${key}`);
    if (bytes === null) await blob.deleteIfExists();
    else await blob.upload(bytes, bytes.length);
  }

  /** Loading `id` into an absent target and into an empty folder fails with `message`; both stay as they were. */
  async function expectRefusedLoad(
    id: string,
    message: RegExp,
    options: { publicKey?: typeof key.publicKey } = {},
  ) {
    const parent = tempDir('target');
    const absent = path.join(parent, 'absent');
    const empty = path.join(parent, 'empty');
    mkdirSync(empty);
    chmodSync(empty, 0o711);
    for (const target of [absent, empty]) {
      await expect(
        loadSnapshot(api, id, target, { publicKey: options.publicKey ?? key.publicKey }),
      ).rejects.toThrow(message);
    }
    // The absent target is still absent, the empty folder still empty (same mode), nothing staged is left.
    expect(await readdir(parent)).toEqual(['empty']);
    expect(await readdir(empty)).toEqual([]);
    expect((await lstat(empty)).mode & 0o7777).toBe(0o711);
  }

  it('round trip: modes, an empty file, two parts, symlinks to a file and to a folder', async () => {
    const { root: workspace } = makeWorkspace();
    const saved = await saveSnapshot(api, workspace, { workspaceId: 'round', privateKey: key.privateKey });
    expect(saved).toMatchObject({
      files: 5,
      symlinks: 4,
      parent: null,
      partsUploaded: 4,
      partsAlreadyStored: 0,
    });
    expect(saved.id).toMatch(/^[0-9a-f]{64}$/);

    const into = path.join(tempDir('loaded'), 'ws');
    expect(await loadSnapshot(api, saved.id, into, { publicKey: key.publicKey })).toEqual({
      id: saved.id,
      workspaceId: 'round',
      files: 5,
      symlinks: 4,
      bytes: PART_BYTES + 17 + 15 + 19 + 15,
    });
    expect(await treeOf(into)).toEqual(await treeOf(workspace));
    expect((await lstat(path.join(into, 'link-to-dir'))).isSymbolicLink()).toBe(true);
    expect(await readFile(path.join(into, 'link-to-dir', 'run.sh'), 'utf8')).toContain('echo run');

    // An empty folder is a target too (replaced whole); the workspace may be named.
    const emptyTarget = tempDir('loaded-empty');
    await loadSnapshot(api, saved.id, emptyTarget, { publicKey: key.publicKey, workspaceId: 'round' });
    expect(await treeOf(emptyTarget)).toEqual(await treeOf(workspace));
    // A non-empty one is refused before anything is downloaded.
    await expect(loadSnapshot(api, saved.id, into, { publicKey: key.publicKey })).rejects.toThrow(
      /is not empty/,
    );
    // A link to an empty folder is no target: nothing is written through it.
    const outside = tempDir('outside-empty');
    const linked = path.join(tempDir('link-parent'), 'linked');
    symlinkSync(outside, linked);
    await expect(loadSnapshot(api, saved.id, linked, { publicKey: key.publicKey })).rejects.toThrow(
      /exists and is not a folder/,
    );
    expect(await readdir(outside)).toEqual([]);

    const verified = await verifySnapshot(api, saved.id, { publicKey: key.publicKey, readData: true });
    expect(verified).toMatchObject({ files: 5, parts: 4, problems: [], dataRead: true });
  });

  it('re-saving an unchanged workspace uploads no part; after one change, one part and the manifest', async () => {
    const { root: workspace } = makeWorkspace();
    const counter = countingSender();
    const counted = snapshotsOf(alpha.key, counter.send);
    const first = await saveSnapshot(counted, workspace, {
      workspaceId: 'resave',
      privateKey: key.privateKey,
    });
    expect(counter.counts()).toEqual({ partPuts: 4, publishes: 1 });

    const again = await saveSnapshot(counted, workspace, {
      workspaceId: 'resave',
      privateKey: key.privateKey,
    });
    expect(counter.counts()).toEqual({ partPuts: 4, publishes: 2 });
    expect(again).toMatchObject({
      parent: first.id,
      partsUploaded: 0,
      partsAlreadyStored: 0,
      bytesUploaded: 0,
    });

    await writeFile(path.join(workspace, 'a.txt'), 'alpha, changed\n');
    const changed = await saveSnapshot(counted, workspace, {
      workspaceId: 'resave',
      privateKey: key.privateKey,
    });
    expect(counter.counts()).toEqual({ partPuts: 5, publishes: 3 });
    expect(changed).toMatchObject({ parent: again.id, partsUploaded: 1 });
    const list = await api.list('resave');
    expect(list.latest).toBe(changed.id);
    expect(list.snapshots.map((item) => item.id).sort()).toEqual([first.id, again.id, changed.id].sort());
  });

  it('a publish that finds a part missing makes the save upload it and publish again, unless the file changed', async () => {
    // A sender that answers the upload of one part itself, so the service never stores that part.
    // The part is a.txt's, whose bytes are new to each workspace: a part of fixed bytes (bin/run.sh)
    // is stored already by earlier saves of the tenant, and dropping its upload would leave nothing
    // missing.
    const dropPart = (content: Buffer, onPublish?: () => Promise<void>): HttpSender => {
      const inner = checkedSender();
      const part = `/snapshots/objects/${sha256(content)}/0`;
      let dropped = false;
      let published = false;
      return async (request) => {
        if (!dropped && request.method === 'PUT' && request.url.endsWith(part)) {
          dropped = true;
          const answer = Buffer.from(JSON.stringify({ sha256: 'a'.repeat(64), part: 0, size: 1 }));
          return {
            status: 201,
            header: () => undefined,
            body: (async function* () {
              yield answer;
            })(),
            bytes: async () => answer,
            json: async () => JSON.parse(answer.toString()) as unknown,
            discard: async () => {},
          };
        }
        if (!published && request.method === 'POST' && onPublish !== undefined) {
          published = true;
          await onPublish();
        }
        return inner(request);
      };
    };
    const { root: workspace, aTxt } = makeWorkspace();
    const lossy = snapshotsOf(alpha.key, dropPart(aTxt));
    const saved = await saveSnapshot(lossy, workspace, { workspaceId: 'repair', privateKey: key.privateKey });
    const into = path.join(tempDir('repaired'), 'ws');
    await loadSnapshot(api, saved.id, into, { publicKey: key.publicKey });
    expect(await treeOf(into)).toEqual(await treeOf(workspace));

    // The file whose part is asked for changed after it was read: nothing of the new bytes is sent.
    const { root: changing, aTxt: changingATxt } = makeWorkspace();
    const changeAll = async () => {
      for (const file of ['a.txt', 'copy/of-a.txt', 'bin/run.sh', 'data/big.bin']) {
        await writeFile(path.join(changing, file), randomBytes(64));
      }
    };
    const racing = snapshotsOf(alpha.key, dropPart(changingATxt, changeAll));
    await expect(
      saveSnapshot(racing, changing, { workspaceId: 'repair-race', privateKey: key.privateKey }),
    ).rejects.toThrow(/changed while it was saved/);
    expect((await asAlpha('/api/workspaces/repair-race/snapshots/latest')).status).toBe(404);
  });

  it('refuses a tampered file, a tampered manifest, a wrong key and a missing part; the target stays as it was', async () => {
    const { root: workspace, aTxt: content } = makeWorkspace();
    const saved = await saveSnapshot(api, workspace, { workspaceId: 'damage', privateKey: key.privateKey });
    const stored = await api.read('damage', saved.id);
    const manifestKey = `workspaces/damage/snapshots/${saved.id}/manifest.json`;

    await expectRefusedLoad(saved.id, /does not verify with the public key given/, {
      publicKey: newKeyPair().publicKey,
    });

    const tampered = Buffer.from(stored!.manifest.toString().replace('"mode":420', '"mode":511'));
    await tamper(alpha.tenant, manifestKey, tampered);
    await expectRefusedLoad(saved.id, /does not match snapshot id/);
    await tamper(alpha.tenant, manifestKey, stored!.manifest);

    const aTxt = sha256(content);
    await tamper(alpha.tenant, `objects/${aTxt}/0`, Buffer.alloc(content.length, 'x'));
    await expectRefusedLoad(saved.id, /do not match the manifest's SHA-256/);
    const damaged = await verifySnapshot(api, saved.id, { publicKey: key.publicKey, readData: true });
    expect(damaged.problems).toEqual(["a.txt: its bytes do not match the manifest's SHA-256"]);

    await tamper(alpha.tenant, `objects/${aTxt}/0`, null);
    await expectRefusedLoad(saved.id, /is not stored/);
    const missing = await verifySnapshot(api, saved.id, { publicKey: key.publicKey });
    expect(missing.problems).toEqual([`a.txt: part ${aTxt}/0 is not stored`]);
  });

  it('refuses a manifest naming ../x: the service at publish (400), the loader before writing anything', async () => {
    const bytes = Buffer.from('escaped');
    const manifest = serializeManifest({
      version: MANIFEST_VERSION,
      workspaceId: 'evil',
      createdAt: new Date().toISOString(),
      files: [{ path: '../x', sha256: sha256(bytes), size: bytes.length, mode: 0o644 }],
      symlinks: [],
    });
    const { signature, id } = signedRaw(manifest.toString(), key.privateKey);
    expect(
      (
        await asAlpha(`/api/workspaces/evil/snapshots/objects/${sha256(bytes)}/0`, {
          method: 'PUT',
          body: bytes,
        })
      ).status,
    ).toBe(201);
    const refused = await asAlpha('/api/workspaces/evil/snapshots', {
      method: 'POST',
      body: JSON.stringify({
        manifest: manifest.toString('base64'),
        signature: signature.toString('base64'),
        parent: null,
      }),
    });
    expect(refused.status).toBe(400);
    expect((await errorOf(refused)).message).toBe(
      'manifest.files.0.path: must not have a "." or ".." segment',
    );

    // Stored behind the service's back, correctly signed and named by its hash: the loader refuses it.
    await tamper(alpha.tenant, `workspaces/evil/snapshots/${id}/manifest.json`, manifest);
    await tamper(alpha.tenant, `workspaces/evil/snapshots/${id}/manifest.sig`, signature);
    await tamper(alpha.tenant, `ids/${id}`, Buffer.from('evil'));
    await expectRefusedLoad(id, /manifest\.files\.0\.path: must not have a "\." or "\.\." segment/);
  });

  it('keeps tenants apart: another tenant cannot read or load a snapshot by its id (404)', async () => {
    const { root, aTxt } = makeWorkspace();
    const saved = await saveSnapshot(api, root, { workspaceId: 'private', privateKey: key.privateKey });
    for (const route of [
      `/api/snapshots/${saved.id}`,
      `/api/workspaces/private/snapshots/${saved.id}`,
      '/api/workspaces/private/snapshots/latest',
      `/api/workspaces/private/snapshots/objects/${sha256(aTxt)}/0`,
    ]) {
      const response = await asBeta(route);
      expect(response.status, route).toBe(404);
      expect((await errorOf(response)).code).toBe('not_found');
    }
    expect((await asBeta(`/api/workspaces/private/snapshots/${saved.id}`, { method: 'DELETE' })).status).toBe(
      404,
    );
    const asBetaApi = snapshotsOf(beta.key);
    await expect(
      loadSnapshot(asBetaApi, saved.id, path.join(tempDir('beta'), 'x'), { publicKey: key.publicKey }),
    ).rejects.toThrow(`no snapshot ${saved.id}`);
    const listed = await (await asBeta('/api/workspaces/private/snapshots')).json();
    expect(listed).toEqual({ snapshots: [], latest: null, next: null });
    expect((await asAlpha(`/api/snapshots/${saved.id}`)).status).toBe(200);

    // Alpha's part is absent for beta (HEAD), and beta's writes land in beta's own space only.
    const partRoute = `/api/workspaces/private/snapshots/objects/${sha256(aTxt)}/0`;
    expect((await asBeta(partRoute, { method: 'HEAD' })).status).toBe(404);
    const betaBytes = Buffer.from('beta writes here');
    const betaRoute = `/api/workspaces/private/snapshots/objects/${sha256(betaBytes)}/0`;
    expect((await asBeta(betaRoute, { method: 'PUT', body: betaBytes })).status).toBe(201);
    expect((await asAlpha(betaRoute, { method: 'HEAD' })).status).toBe(404);
    // Beta publishing alpha's manifest: alpha's parts are not beta's, so they are missing (422),
    // and alpha's snapshot and latest stay as they were.
    const stored = (await (await asAlpha(`/api/snapshots/${saved.id}`)).json()) as {
      manifest: string;
      signature: string;
    };
    const publish = await asBeta('/api/workspaces/private/snapshots', {
      method: 'POST',
      body: JSON.stringify({ manifest: stored.manifest, signature: stored.signature, parent: null }),
    });
    expect(publish.status).toBe(422);
    expect(
      (await (await asAlpha('/api/workspaces/private/snapshots/latest')).json()) as { id: string },
    ).toMatchObject({
      id: saved.id,
    });
    // A tenant that is not an admin cannot remove anyone's trusted keys, its own included.
    for (const tenant of [alpha.tenant, beta.tenant]) {
      expect((await asBeta(`/api/snapshot-keys/${tenant}`, { method: 'DELETE' })).status).toBe(403);
    }
  });

  it('of two publishers on one parent one wins; the other gets 409 with latest and can publish on it', async () => {
    const base = buildSnapshot('race', [{ path: 'f', bytes: Buffer.from('base') }], key.privateKey);
    const one = buildSnapshot('race', [{ path: 'f', bytes: Buffer.from('one') }], key.privateKey);
    const two = buildSnapshot('race', [{ path: 'f', bytes: Buffer.from('two') }], key.privateKey);
    for (const built of [base, one, two]) {
      for (const [hash, part, bytes] of built.parts) await api.putPart('race', hash, part, bytes);
    }
    const publish = (built: typeof base, parent: string | null) =>
      api.publish('race', {
        manifest: built.manifest,
        signature: built.signature,
        parent,
        allowExternalSymlinks: false,
      });
    await publish(base, null);
    const outcomes = await Promise.allSettled([publish(one, base.id), publish(two, base.id)]);
    const won = outcomes.findIndex((outcome) => outcome.status === 'fulfilled');
    expect(outcomes.filter((outcome) => outcome.status === 'fulfilled')).toHaveLength(1);
    const winner = [one, two][won]!;
    const loser = outcomes[1 - won] as PromiseRejectedResult;
    expect(loser.reason).toBeInstanceOf(StaleParentError);
    expect((loser.reason as StaleParentError).latest).toBe(winner.id);
    const raw = await asAlpha('/api/workspaces/race/snapshots', {
      method: 'POST',
      body: JSON.stringify({
        manifest: base.manifest.toString('base64'),
        signature: base.signature.toString('base64'),
        parent: 'f'.repeat(64),
      }),
    });
    expect(raw.status).toBe(409);
    expect(await errorOf(raw)).toMatchObject({ code: 'conflict', latest: winner.id });
  });

  it('deleting a snapshot keeps the parts another snapshot needs and moves latest to the newest remaining', async () => {
    const { root: workspace } = makeWorkspace();
    const first = await saveSnapshot(api, workspace, { workspaceId: 'del', privateKey: key.privateKey });
    await writeFile(path.join(workspace, 'second.txt'), 'only in the second\n');
    const second = await saveSnapshot(api, workspace, { workspaceId: 'del', privateKey: key.privateKey });
    const response = await asAlpha(`/api/workspaces/del/snapshots/${second.id}`, { method: 'DELETE' });
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({
      id: second.id,
      latest: first.id,
      objectsDeleted: 0,
      collectionComplete: true,
    });
    expect((await asAlpha(`/api/workspaces/del/snapshots/${second.id}`)).status).toBe(404);
    const into = path.join(tempDir('after-delete'), 'ws');
    await loadSnapshot(api, first.id, into, { publicKey: key.publicKey });
    const expected = await treeOf(workspace);
    delete expected['second.txt'];
    expect(await treeOf(into)).toEqual(expected);
    expect((await asAlpha(`/api/workspaces/del/snapshots/${second.id}`, { method: 'DELETE' })).status).toBe(
      404,
    );
    const last = await asAlpha(`/api/workspaces/del/snapshots/${first.id}`, { method: 'DELETE' });
    expect(((await last.json()) as { latest: unknown }).latest).toBeNull();
    expect((await asAlpha('/api/workspaces/del/snapshots/latest')).status).toBe(404);
  });

  it('parts, publishes, pages and trusted keys answer as the document says, raw and through CairnClient', async () => {
    const content = Buffer.from(`pages-${randomBytes(8).toString('hex')}`);
    const built = buildSnapshot('pages', [{ path: 'f', bytes: content }], key.privateKey);
    const [hash, part, bytes] = built.parts[0]!;
    const partRoute = `/api/workspaces/pages/snapshots/objects/${hash}/${part}`;
    const publishBody = (snapshot: typeof built, parent: string | null) =>
      JSON.stringify({
        manifest: snapshot.manifest.toString('base64'),
        signature: snapshot.signature.toString('base64'),
        parent,
      });

    // A part not stored yet: HEAD and GET 404, the client's null; a publish naming it is 422.
    expect((await asAlpha(partRoute, { method: 'HEAD' })).status).toBe(404);
    expect((await asAlpha(partRoute)).status).toBe(404);
    expect(await api.headPart('pages', hash, part)).toBeNull();
    expect(await api.getPart('pages', hash, part)).toBeNull();
    const missing = await asAlpha('/api/workspaces/pages/snapshots', {
      method: 'POST',
      body: publishBody(built, null),
    });
    expect(missing.status).toBe(422);
    expect(await errorOf(missing)).toMatchObject({
      code: 'missing_objects',
      missing: [`${hash}/0`],
      missingCount: 1,
    });
    await expect(api.publish('pages', { ...built, parent: null })).rejects.toBeInstanceOf(MissingPartsError);

    // Stored once (201), the same bytes again 200; other bytes under a stored part 409.
    expect((await asAlpha(partRoute, { method: 'PUT', body: bytes })).status).toBe(201);
    const again = await asAlpha(partRoute, { method: 'PUT', body: bytes });
    expect(again.status).toBe(200);
    expect(await again.json()).toEqual({ sha256: hash, part: 0, size: bytes.length });
    expect(await api.putPart('pages', hash, part, bytes)).toEqual({
      sha256: hash,
      part: 0,
      size: bytes.length,
      created: false,
    });
    const other = randomBytes(32).toString('hex');
    expect(
      (await asAlpha(`/api/workspaces/pages/snapshots/objects/${other}/1`, { method: 'PUT', body: 'x' }))
        .status,
    ).toBe(201);
    const clash = await asAlpha(`/api/workspaces/pages/snapshots/objects/${other}/1`, {
      method: 'PUT',
      body: 'y',
    });
    expect(clash.status).toBe(409);
    expect((await errorOf(clash)).code).toBe('conflict');
    const head = await asAlpha(partRoute, { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(head.headers.get('content-length')).toBe(String(bytes.length));
    expect(Buffer.from(await (await asAlpha(partRoute)).arrayBuffer())).toEqual(bytes);
    expect(await api.headPart('pages', hash, part)).toBe(bytes.length);
    expect(
      (await asAlpha(`/api/workspaces/pages/snapshots/objects/${'A'.repeat(64)}/0`, { method: 'HEAD' }))
        .status,
    ).toBe(400);

    // A publish sent again answers as the first time did (the client marks it idempotent).
    const first = await asAlpha('/api/workspaces/pages/snapshots', {
      method: 'POST',
      body: publishBody(built, null),
    });
    const repeated = await asAlpha('/api/workspaces/pages/snapshots', {
      method: 'POST',
      body: publishBody(built, null),
    });
    expect([first.status, repeated.status]).toEqual([201, 201]);
    expect(await repeated.json()).toEqual(await first.json());
    expect(await api.publish('pages', { ...built, parent: null })).toEqual({
      id: built.id,
      latest: built.id,
    });

    // Two more snapshots; pages of one, newest first, the cursor of one page leading to the next.
    let parent = built.id;
    const ids = [built.id];
    for (const text of ['two', 'three']) {
      const next = buildSnapshot(
        'pages',
        [{ path: 'f', bytes: Buffer.concat([content, Buffer.from(text)]) }],
        key.privateKey,
      );
      for (const [h, p, b] of next.parts) await api.putPart('pages', h, p, b);
      parent = (await api.publish('pages', { ...next, parent })).id;
      ids.push(parent);
    }
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const query: string = cursor === null ? '?limit=1' : `?limit=1&cursor=${encodeURIComponent(cursor)}`;
      const page = (await (await asAlpha(`/api/workspaces/pages/snapshots${query}`)).json()) as {
        snapshots: { id: string }[];
        latest: string;
        next: string | null;
      };
      expect(page.snapshots).toHaveLength(1);
      expect(page.latest).toBe(parent);
      seen.push(...page.snapshots.map((item) => item.id));
      cursor = page.next;
    } while (cursor !== null);
    expect([...seen].sort()).toEqual([...ids].sort());
    expect((await api.listPage('pages', { limit: 2 })).next).not.toBeNull();
    const all = await api.list('pages');
    expect(all.latest).toBe(parent);
    expect(all.snapshots.map((item) => item.id)).toEqual(seen);
    const badCursor = await asAlpha('/api/workspaces/pages/snapshots?cursor=nonsense');
    expect(badCursor.status).toBe(400);
    expect((await errorOf(badCursor)).message).toMatch(/^cursor: /);

    // Reads: by id in the workspace, by id alone, latest; absent ones are null through the client.
    const byId = (await (await asAlpha(`/api/snapshots/${built.id}`)).json()) as { manifest: string };
    expect(Buffer.from(byId.manifest, 'base64')).toEqual(built.manifest);
    expect((await api.find(built.id))?.workspaceId).toBe('pages');
    expect((await api.read('pages', 'latest'))?.id).toBe(parent);
    expect(await api.find('0'.repeat(64))).toBeNull();
    expect(await api.read('no-snapshots-here', 'latest')).toBeNull();

    // Deletes: the report, then 404 for the same snapshot.
    expect(await api.delete('pages', parent)).toMatchObject({ id: parent, latest: ids[1] });
    const gone = await api.delete('pages', parent).catch((error: unknown) => error);
    expect(gone).toBeInstanceOf(CairnHttpError);
    expect((gone as CairnHttpError).status).toBe(404);

    // Trusted keys through the client: admin only.
    const admin = snapshotsOf(ops.key);
    const trusted = rawBase64(newKeyPair().publicKey);
    expect(await admin.trustedKeys(alpha.tenant)).toEqual({
      tenant: alpha.tenant,
      configured: [],
      runtime: [],
    });
    const refused = await api.trustedKeys(alpha.tenant).catch((error: unknown) => error);
    expect((refused as CairnHttpError).status).toBe(403);
    expect(await admin.setTrustedKeys(alpha.tenant, [trusted, trusted])).toEqual({
      tenant: alpha.tenant,
      configured: [],
      runtime: [trusted],
    });
    await admin.clearTrustedKeys(alpha.tenant);
    expect((await admin.trustedKeys(alpha.tenant)).runtime).toEqual([]);
  });

  it('answers 400 naming the field, 413 for oversize bodies, 401 without a credential', async () => {
    const built = buildSnapshot('v', [{ path: 'f', bytes: Buffer.from('x') }], key.privateKey);
    const body = (fields: Record<string, unknown>) =>
      JSON.stringify({
        manifest: built.manifest.toString('base64'),
        signature: built.signature.toString('base64'),
        parent: null,
        ...fields,
      });
    const cases: [string, RequestInit, string][] = [
      [`/api/workspaces/v/snapshots/objects/${'A'.repeat(64)}/0`, { method: 'PUT', body: 'x' }, 'sha256'],
      [`/api/workspaces/v/snapshots/objects/${'a'.repeat(64)}/007`, { method: 'PUT', body: 'x' }, 'part'],
      [
        `/api/workspaces/bad!id/snapshots/objects/${'a'.repeat(64)}/1`,
        { method: 'PUT', body: 'x' },
        'workspaceId',
      ],
      ['/api/workspaces/v/snapshots', { method: 'POST', body: 'not json' }, 'body'],
      ['/api/workspaces/v/snapshots', { method: 'POST', body: body({ signature: undefined }) }, 'signature'],
      [
        '/api/workspaces/v/snapshots',
        { method: 'POST', body: body({ manifest: 'not base64!' }) },
        'manifest',
      ],
      ['/api/workspaces/v/snapshots', { method: 'POST', body: body({ extra: 1 }) }, 'extra'],
      ['/api/workspaces/v/snapshots', { method: 'POST', body: body({ parent: 'c1' }) }, 'parent'],
      [
        '/api/workspaces/v/snapshots',
        { method: 'POST', body: body({ allowExternalSymlinks: 'yes' }) },
        'allowExternalSymlinks',
      ],
      [
        '/api/workspaces/v/snapshots',
        {
          method: 'POST',
          body: body({
            manifest: Buffer.from(JSON.stringify(JSON.parse(built.manifest.toString()), null, 1)).toString(
              'base64',
            ),
          }),
        },
        'manifest',
      ],
      ['/api/workspaces/other/snapshots', { method: 'POST', body: body({}) }, 'manifest.workspaceId'],
      ['/api/workspaces/v/snapshots?limit=0', { method: 'GET' }, 'limit'],
      ['/api/workspaces/v/snapshots/latest', { method: 'DELETE' }, 'snapshotId'],
      ['/api/snapshots/latest', { method: 'GET' }, 'snapshotId'],
    ];
    for (const [route, init, field] of cases) {
      const response = await asAlpha(route, init);
      expect(response.status, `${init.method} ${route}`).toBe(400);
      const error = await errorOf(response);
      expect(error.code).toBe('invalid_argument');
      expect(error.message.startsWith(`${field}: `), `${route}: ${error.message}`).toBe(true);
    }
    const external = buildSnapshot('v', [], key.privateKey, {
      symlinks: [{ source: 'etc', target: '/etc' }],
    });
    const refused = await asAlpha('/api/workspaces/v/snapshots', {
      method: 'POST',
      body: JSON.stringify({
        manifest: external.manifest.toString('base64'),
        signature: external.signature.toString('base64'),
        parent: null,
      }),
    });
    expect((await errorOf(refused)).message).toMatch(/^manifest\.symlinks\.0\.target: leaves the workspace/);
    const allowed = await asAlpha('/api/workspaces/v/snapshots', {
      method: 'POST',
      body: JSON.stringify({
        manifest: external.manifest.toString('base64'),
        signature: external.signature.toString('base64'),
        parent: null,
        allowExternalSymlinks: true,
      }),
    });
    expect(allowed.status).toBe(201);
    await expectRefusedLoad(external.id, /leaves the workspace/);
    const into = path.join(tempDir('external'), 'ws');
    await loadSnapshot(api, external.id, into, { publicKey: key.publicKey, allowExternalSymlinks: true });
    expect(await readlink(path.join(into, 'etc'))).toBe('/etc');

    const tooBig = await asAlpha(`/api/workspaces/v/snapshots/objects/${'a'.repeat(64)}/1`, {
      method: 'PUT',
      body: Buffer.alloc(PART_BYTES + 1),
    });
    expect(tooBig.status).toBe(413);
    expect((await errorOf(tooBig)).code).toBe('payload_too_large');
    const hugeBody = await asAlpha('/api/workspaces/v/snapshots', {
      method: 'POST',
      body: 'x'.repeat(3_200_000),
    });
    expect(hugeBody.status).toBe(413);
    expect((await client(app.url)('/api/workspaces/v/snapshots')).status).toBe(401);
  });

  it('trusted keys set by an admin: only signatures of those keys publish; clearing them lifts it', async () => {
    const trusted = newKeyPair();
    const route = `/api/snapshot-keys/${alpha.tenant}`;
    expect((await asAlpha(route, { method: 'PUT', body: JSON.stringify({ keys: [] }) })).status).toBe(403);
    const badKey = await asOps(route, { method: 'PUT', body: JSON.stringify({ keys: ['bm90IGEga2V5'] }) });
    expect((await errorOf(badKey)).message).toMatch(/^keys\.0: /);
    const set = await asOps(route, {
      method: 'PUT',
      body: JSON.stringify({ keys: [rawBase64(trusted.publicKey)] }),
    });
    expect(set.status).toBe(200);
    expect(await set.json()).toEqual({
      tenant: alpha.tenant,
      configured: [],
      runtime: [rawBase64(trusted.publicKey)],
    });
    try {
      const { root: workspace } = makeWorkspace();
      await expect(
        saveSnapshot(api, workspace, { workspaceId: 'trusted', privateKey: key.privateKey }),
      ).rejects.toThrow(/signature: does not verify with any trusted snapshot key/);
      expect((await asAlpha('/api/workspaces/trusted/snapshots/latest')).status).toBe(404);
      const saved = await saveSnapshot(api, workspace, {
        workspaceId: 'trusted',
        privateKey: trusted.privateKey,
      });
      expect((await asAlpha(`/api/snapshots/${saved.id}`)).status).toBe(200);
    } finally {
      expect((await asOps(route, { method: 'DELETE' })).status).toBe(204);
    }
    expect(await (await asOps(route)).json()).toEqual({ tenant: alpha.tenant, configured: [], runtime: [] });
    const anyKey = await saveSnapshot(api, makeWorkspace().root, {
      workspaceId: 'trusted',
      privateKey: key.privateKey,
    });
    expect(anyKey.id).toMatch(/^[0-9a-f]{64}$/);
  });

  it('the cairn command: keygen, save, load, verify, list, delete; exit codes 0, 1 and 2', async () => {
    const home = tempDir('cli-keys');
    const env = { CAIRN_URL: app.url, CAIRN_KEY: alpha.key };
    const keygen = await runCairn(['keygen', 'me'], {}, home);
    expect(keygen.code).toBe(0);
    expect(keygen.stdout.trim()).toMatch(/^[A-Za-z0-9+/]{43}=$/);
    expect((await lstat(path.join(home, 'me.key'))).mode & 0o777).toBe(0o600);
    expect((await runCairn(['keygen', 'me'], {}, home)).code).toBe(2);

    const { root: workspace, aTxt } = makeWorkspace();
    const save = await runCairn(
      ['snapshot', 'save', workspace, '--workspace', 'cli', '--key', path.join(home, 'me.key')],
      env,
    );
    expect(save.code, save.stderr).toBe(0);
    const id = save.stdout.trim();
    expect(id).toMatch(/^[0-9a-f]{64}$/);
    expect(save.stderr).toMatch(/saved 5 files and 4 symlinks/);

    const into = path.join(tempDir('cli-load'), 'ws');
    const pub = path.join(home, 'me.pub');
    const load = await runCairn(['snapshot', 'load', id, into, '--public-key', pub], env);
    expect(load.code, load.stderr).toBe(0);
    expect(JSON.parse(load.stdout)).toMatchObject({ id, workspaceId: 'cli', files: 5, symlinks: 4 });
    expect(await treeOf(into)).toEqual(await treeOf(workspace));

    // The printed base64 key works as a public key file too.
    writeFileSync(path.join(home, 'raw.pub'), keygen.stdout);
    const verify = await runCairn(
      ['snapshot', 'verify', id, '--public-key', path.join(home, 'raw.pub'), '--read-data'],
      env,
    );
    expect(verify.code, verify.stderr).toBe(0);
    expect(JSON.parse(verify.stdout)).toMatchObject({ id, problems: [], dataRead: true });

    const list = await runCairn(['snapshot', 'list', '--workspace', 'cli'], env);
    expect(JSON.parse(list.stdout)).toMatchObject({ latest: id, snapshots: [{ id }] });

    const wrongKey = path.join(home, 'other');
    await runCairn(['keygen', wrongKey], {});
    const refused = await runCairn(
      ['snapshot', 'load', id, path.join(tempDir('cli-refused'), 'ws'), '--public-key', `${wrongKey}.pub`],
      env,
    );
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/does not verify/);

    await tamper(alpha.tenant, `objects/${sha256(aTxt)}/0`, null);
    const damaged = await runCairn(['snapshot', 'verify', id, '--public-key', pub], env);
    expect(damaged.code).toBe(1);
    expect(damaged.stderr).toMatch(/is damaged:\n {2}a\.txt: part [0-9a-f]{64}\/0 is not stored/);

    for (const usage of [
      ['snapshot'],
      ['snapshot', 'save', workspace],
      ['snapshot', 'load', id],
      ['snapshot', 'save', workspace, '--workspace', 'cli', '--key', 'k', '--concurrency', '0'],
      ['snapshot', 'list', '--bogus'],
      ['keygen'],
    ]) {
      expect((await runCairn(usage, env)).code, usage.join(' ')).toBe(2);
    }
    expect((await runCairn(['snapshot', 'list', '--workspace', 'cli'], {})).code).toBe(2);

    const deleted = await runCairn(['snapshot', 'delete', id, '--workspace', 'cli'], env);
    expect(deleted.code, deleted.stderr).toBe(0);
    expect(JSON.parse(deleted.stdout)).toMatchObject({ id, latest: null });
    expect((await runCairn(['snapshot', 'delete', id, '--workspace', 'cli'], env)).code).toBe(1);
  });
});
