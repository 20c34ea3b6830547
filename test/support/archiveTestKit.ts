import { createHash, randomUUID } from 'node:crypto';
import { rm, writeFile } from 'node:fs/promises';
import path from 'node:path';

import {
  BlobServiceClient,
  newPipeline,
  type RequestPolicy,
  type RequestPolicyFactory,
  StorageSharedKeyCredential,
} from '@azure/storage-blob';

import { AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY } from '../../dev/azurite';
import type { SessionArchive } from '../../shared/archive/sessionArchive';
import { BLOCK_BYTES, blockKey, tailKey } from '../../shared/protocol/archive/identifiers';
import type { ManifestFile } from '../../shared/protocol/archive/manifest';
import { StorageUnavailableError } from '../../shared/protocol/errors';
import { BlobImmutableObjectStore } from '../../shared/storage/azure/blobImmutableObjectStore';
import type {
  DeleteOptions,
  ImmutableObjectStore,
  ObjectInfo,
  PutResult,
  RewritableObjectStore,
  SwapResult,
} from '../../shared/storage/immutableObjectStore';
import { LocalImmutableObjectStore } from '../../shared/storage/local/localImmutableObjectStore';
import type { SessionIndex, SessionPage, SessionRecord } from '../../shared/storage/sessionIndex';
import { tempDir } from './cleanup';
import { STORAGE_TIMEOUT_MS } from './timeouts';

/** Test support for the archive: real stores wrapped to count calls and to fail at a chosen step. */

type Method = 'put' | 'get' | 'head' | 'list' | 'readPointer' | 'swapPointer' | 'delete' | 'touch';

/**
 * A real store, observed: counts calls per method, and throws StorageUnavailableError (as a real
 * fault would surface) when `failWhen(method, key)` says so, before the call reaches the store.
 */
export class ObservedObjectStore implements ImmutableObjectStore {
  readonly calls: Record<Method, number> = {
    put: 0,
    get: 0,
    head: 0,
    list: 0,
    readPointer: 0,
    swapPointer: 0,
    delete: 0,
    touch: 0,
  };
  failWhen: (method: Method, key: string) => boolean = () => false;

  constructor(private readonly inner: ImmutableObjectStore) {}

  resetCounts(): void {
    for (const method of Object.keys(this.calls) as Method[]) this.calls[method] = 0;
  }

  private enter(method: Method, key: string): void {
    this.calls[method]++;
    if (this.failWhen(method, key)) throw new StorageUnavailableError(`injected fault: ${method} ${key}`);
  }

  async put(key: string, bytes: Buffer): Promise<PutResult> {
    this.enter('put', key);
    return this.inner.put(key, bytes);
  }
  async get(key: string): Promise<Buffer | null> {
    this.enter('get', key);
    return this.inner.get(key);
  }
  async head(key: string): Promise<ObjectInfo | null> {
    this.enter('head', key);
    return this.inner.head(key);
  }
  async *list(prefix: string): AsyncIterable<ObjectInfo> {
    this.enter('list', prefix);
    yield* this.inner.list(prefix);
  }
  async readPointer(key: string): Promise<string | null> {
    this.enter('readPointer', key);
    return this.inner.readPointer(key);
  }
  async swapPointer(key: string, expected: string | null, next: string | null): Promise<SwapResult> {
    this.enter('swapPointer', key);
    return this.inner.swapPointer(key, expected, next);
  }
  async delete(key: string, options?: DeleteOptions): Promise<boolean> {
    this.enter('delete', key);
    return this.inner.delete(key, options);
  }
  async touch(key: string): Promise<ObjectInfo | null> {
    this.enter('touch', key);
    return this.inner.touch(key);
  }
}

/** When {@link HookedObjectStore} runs `before`: once, just ahead of the next put of a matching key. */
export interface PutHook {
  readonly matches: (key: string) => boolean;
  before: (() => Promise<void>) | null;
}

/**
 * An observed store that runs `hook.before` once, just ahead of the next put of a key the hook
 * matches (then clears it): another writer or a collector stepping in between two steps of a
 * publish. A `before` that throws fails that put, as a fault would.
 */
export class HookedObjectStore extends ObservedObjectStore {
  constructor(
    inner: ImmutableObjectStore,
    private readonly hook: PutHook,
  ) {
    super(inner);
  }

  override async put(key: string, bytes: Buffer): Promise<PutResult> {
    const before = this.hook.before;
    if (before !== null && this.hook.matches(key)) {
      this.hook.before = null;
      await before();
    }
    return super.put(key, bytes);
  }
}

/** A real session index that fails its updates while `failUpdates` is set. */
export class FaultySessionIndex implements SessionIndex {
  failUpdates = false;
  constructor(private readonly inner: SessionIndex) {}
  ownerOf(sessionId: string): Promise<string | null> {
    return this.inner.ownerOf(sessionId);
  }
  claim(sessionId: string, tenant: string): Promise<string> {
    return this.inner.claim(sessionId, tenant);
  }
  get(tenant: string, sessionId: string): Promise<SessionRecord | null> {
    return this.inner.get(tenant, sessionId);
  }
  list(tenant: string, options: { after?: string; limit: number }): Promise<SessionPage> {
    return this.inner.list(tenant, options);
  }
  async update(
    tenant: string,
    sessionId: string,
    decide: (current: SessionRecord | null) => Promise<SessionRecord | null>,
  ): Promise<void> {
    if (this.failUpdates) throw new StorageUnavailableError('injected fault: index update');
    return this.inner.update(tenant, sessionId, decide);
  }
  remove(tenant: string, sessionId: string): Promise<boolean> {
    return this.inner.remove(tenant, sessionId);
  }
}

export interface StoreBackend {
  readonly name: 'local' | 'blob';
  /** A fresh store; `httpRequests()` counts the HTTP requests it sent (Blob; 0 locally). */
  /** `maxObjectBytes`: larger for the store under sealed objects. */
  create(maxObjectBytes?: number): Promise<{
    store: RewritableObjectStore;
    /** Replaces stored bytes behind the store's back (a damaged disk, a tampering operator). */
    tamper: (key: string, bytes: Buffer) => Promise<void>;
    httpRequests: () => number;
    destroy: () => Promise<void>;
  }>;
}

export function storeBackends(blobEndpoint: () => string): StoreBackend[] {
  return [
    {
      name: 'local',
      async create(maxObjectBytes) {
        const dir = tempDir('archive');
        const root = path.join(dir, 'sessions');
        return {
          store: new LocalImmutableObjectStore(root, path.join(dir, 'tmp'), undefined, maxObjectBytes),
          tamper: async (key, bytes) => {
            await rm(path.join(root, key));
            await writeFile(path.join(root, key), bytes);
          },
          httpRequests: () => 0,
          destroy: () => rm(dir, { recursive: true, force: true }),
        };
      },
    },
    {
      name: 'blob',
      async create(maxObjectBytes) {
        let requests = 0;
        const pipeline = newPipeline(new StorageSharedKeyCredential(AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY));
        // An Azure pipeline policy that counts every HTTP request the store sends (retries included).
        const counting: RequestPolicyFactory = {
          create: (next: RequestPolicy): RequestPolicy => ({
            sendRequest: (request) => {
              requests++;
              return next.sendRequest(request);
            },
          }),
        };
        pipeline.factories.unshift(counting);
        const service = new BlobServiceClient(blobEndpoint(), pipeline);
        const container = service.getContainerClient(`a${randomUUID().replaceAll('-', '').slice(0, 20)}`);
        return {
          store: new BlobImmutableObjectStore(
            container,
            'sessions/',
            STORAGE_TIMEOUT_MS,
            undefined,
            maxObjectBytes,
          ),
          tamper: async (key, bytes) => {
            await container.getBlockBlobClient(`sessions/${key}`).upload(bytes, bytes.length);
          },
          httpRequests: () => requests,
          destroy: async () => {
            await container.deleteIfExists();
          },
        };
      },
    },
  ];
}

export function sha256(bytes: Buffer): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/** The objects of a file as the client splits it, and its manifest entry. */
export function splitFile(
  filePath: string,
  bytes: Buffer,
  generation: string,
  checkpointId: string,
): { objects: [string, Buffer][]; file: ManifestFile } {
  const objects: [string, Buffer][] = [];
  const blocks = Math.floor(bytes.length / BLOCK_BYTES);
  for (let index = 0; index < blocks; index++) {
    objects.push([
      blockKey(generation, index),
      bytes.subarray(index * BLOCK_BYTES, (index + 1) * BLOCK_BYTES),
    ]);
  }
  if (bytes.length % BLOCK_BYTES > 0) {
    objects.push([tailKey(checkpointId, generation), bytes.subarray(blocks * BLOCK_BYTES)]);
  }
  return { objects, file: { path: filePath, generation, size: bytes.length, sha256: sha256(bytes) } };
}

/** Uploads every object of `files` (16 at a time) and returns their manifest entries. */
export async function uploadFiles(
  archive: SessionArchive,
  tenant: string,
  sessionId: string,
  checkpointId: string,
  files: { path: string; bytes: Buffer; generation: string }[],
): Promise<ManifestFile[]> {
  const entries: ManifestFile[] = [];
  const objects: [string, Buffer][] = [];
  for (const file of files) {
    const split = splitFile(file.path, file.bytes, file.generation, checkpointId);
    entries.push(split.file);
    objects.push(...split.objects);
  }
  for (let start = 0; start < objects.length; start += 16) {
    await Promise.all(
      objects
        .slice(start, start + 16)
        .map(([key, bytes]) => archive.putObject(tenant, sessionId, key, bytes)),
    );
  }
  return entries;
}

export async function restoreBytes(
  archive: SessionArchive,
  tenant: string,
  sessionId: string,
  checkpointId: string,
  filePath: string,
): Promise<Buffer> {
  const { stream } = await archive.restoreFile(tenant, sessionId, checkpointId, filePath);
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}
