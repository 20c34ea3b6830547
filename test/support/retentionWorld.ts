import { createHash, randomUUID } from 'node:crypto';
import { rm } from 'node:fs/promises';
import path from 'node:path';

import { BlobServiceClient, StorageSharedKeyCredential } from '@azure/storage-blob';

import { AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY } from '../../dev/azurite';
import { plainArchiveStorage } from '../../shared/archive/sealedArchive';
import { SessionArchive } from '../../shared/archive/sessionArchive';
import { auditingOff } from '../../shared/audit/auditChainCheck';
import type { PrunerOptions, RetentionPruner } from '../../shared/jobs/retentionPrune';
import type { Verifier, VerifierOptions } from '../../shared/jobs/verify';
import { MemoryFacts } from '../../shared/memory/memory';
import type { MemoryStore } from '../../shared/memory/memoryStore';
import { StorageUnavailableError } from '../../shared/protocol/errors';
import { KEEP_EVERYTHING, RetentionPolicies } from '../../shared/retention/policy';
import { PruneStates } from '../../shared/retention/pruneState';
import { retentionPruner, type RetentionStores, retentionVerifier } from '../../shared/services';
import { TrustedSnapshotKeys } from '../../shared/snapshots/trustedKeys';
import { type SnapshotStores, WorkspaceSnapshots } from '../../shared/snapshots/workspaceSnapshots';
import { BlobImmutableObjectStore } from '../../shared/storage/azure/blobImmutableObjectStore';
import { BlobKeyValueStoreFactory } from '../../shared/storage/azure/blobKeyValueStore';
import { TableSessionIndex } from '../../shared/storage/azure/sessionIndexTable';
import { TableMemoryStore } from '../../shared/storage/azure/tableMemoryStore';
import type { ImmutableObjectStore } from '../../shared/storage/immutableObjectStore';
import type { KeyValueStore, KeyValueStoreFactory } from '../../shared/storage/keyValueStore';
import { LocalImmutableObjectStore } from '../../shared/storage/local/localImmutableObjectStore';
import { LocalKeyValueStoreFactory } from '../../shared/storage/local/localKeyValueStore';
import { LocalMemoryStore } from '../../shared/storage/local/localMemoryStore';
import type { SessionIndex } from '../../shared/storage/sessionIndex';
import {
  recordingKeyValueStores,
  recordingMemoryStore,
  recordingSessionIndex,
  recordingSnapshotStores,
} from '../../shared/tenants/recordingStores';
import { TenantDirectory } from '../../shared/tenants/tenantDirectory';
import { ThreadStore } from '../../shared/threads/threadStore';
import { tempDir } from './cleanup';
import { azuriteTable } from './tables';
import { STORAGE_TIMEOUT_MS } from './timeouts';

/** A logger that drops every line, for a prune or verification whose log a test does not read. */
export const silent = {
  child: () => silent,
  info: () => {},
  warn: () => {},
  error: () => {},
  debug: () => {},
} as never;
/**
 * Every store retention covers, wired as the composition root wires them, on one backend: the
 * key/value and thread spaces, memory facts, session archives (objects and the Table index) and
 * snapshots, each recording its tenants in the directory. Prune runs and verifiers are made with
 * wrappers around the real stores that count storage requests or fail the storage after a number
 * of deletions (never a mock).
 */

export type Backend = 'local' | 'blob';

export const MAX_VALUE_BYTES = 2 * 1024 * 1024;

/** Requests of a prune run, by method (`read`, `head`, `write`, `delete`, `list`, `get`, ...). */
export class RequestCounter {
  readonly byMethod = new Map<string, number>();
  count(method: string): void {
    this.byMethod.set(method, (this.byMethod.get(method) ?? 0) + 1);
  }
  get total(): number {
    return [...this.byMethod.values()].reduce((a, b) => a + b, 0);
  }
  of(...methods: string[]): number {
    return methods.reduce((sum, method) => sum + (this.byMethod.get(method) ?? 0), 0);
  }
}

/** Once `deletes` deletions went through, every further storage call fails (a storage that went away). */
export class StorageFault {
  private deletes = 0;
  constructor(private readonly allowedDeletes: number) {}
  check(method: string): void {
    if (this.deletes >= this.allowedDeletes)
      throw new StorageUnavailableError('injected: the storage went away');
    if (method === 'delete') this.deletes += 1;
  }
}

export interface Instrumentation {
  readonly counter?: RequestCounter;
  readonly fault?: StorageFault;
  /** Runs before each deletion of the key/value stores goes through (another writer's moment). */
  readonly beforeDelete?: (key: string) => Promise<void>;
  /** Runs before each deletion of the object stores (archives, snapshots) goes through. */
  readonly beforeObjectDelete?: (key: string) => Promise<void>;
}

function observe(method: string, instrumentation: Instrumentation): void {
  instrumentation.counter?.count(method);
  instrumentation.fault?.check(method);
}

export function instrumentedStore(inner: KeyValueStore, instrumentation: Instrumentation): KeyValueStore {
  const seen = (method: string) => observe(method, instrumentation);
  return {
    read: async (key) => (seen('read'), inner.read(key)),
    head: async (key) => (seen('head'), inner.head(key)),
    write: async (key, value, conditions) => (seen('write'), inner.write(key, value, conditions)),
    append: async (key, bytes, conditions) => (seen('append'), inner.append(key, bytes, conditions)),
    delete: async (key, conditions) => {
      seen('delete');
      await instrumentation.beforeDelete?.(key);
      return inner.delete(key, conditions);
    },
    list: async (options) => (seen('list'), inner.list(options)),
    listItems: async (options) => (seen('list'), inner.listItems(options)),
  };
}

export function instrumentedStores(
  inner: KeyValueStoreFactory,
  instrumentation: Instrumentation,
): KeyValueStoreFactory {
  return {
    kind: inner.kind,
    maxValueBytes: inner.maxValueBytes,
    forTenant: (tenant) => instrumentedStore(inner.forTenant(tenant), instrumentation),
    forSpace: (space, tenant) => instrumentedStore(inner.forSpace(space, tenant), instrumentation),
  };
}

export function instrumentedObjects(
  inner: ImmutableObjectStore,
  instrumentation: Instrumentation,
): ImmutableObjectStore {
  const seen = (method: string) => observe(method, instrumentation);
  return {
    put: async (key, bytes) => (seen('write'), inner.put(key, bytes)),
    get: async (key) => (seen('read'), inner.get(key)),
    head: async (key) => (seen('head'), inner.head(key)),
    async *list(prefix) {
      seen('list');
      yield* inner.list(prefix);
    },
    readPointer: async (key) => (seen('read'), inner.readPointer(key)),
    swapPointer: async (key, expected, next) => (seen('write'), inner.swapPointer(key, expected, next)),
    delete: async (key, options) => {
      seen('delete');
      await instrumentation.beforeObjectDelete?.(key);
      return inner.delete(key, options);
    },
    touch: async (key) => (seen('touch'), inner.touch(key)),
  };
}

export interface RetentionWorld {
  readonly backend: Backend;
  readonly kvStores: KeyValueStoreFactory;
  readonly directory: TenantDirectory;
  readonly policies: RetentionPolicies;
  readonly states: PruneStates;
  readonly threads: ThreadStore;
  readonly memory: MemoryFacts;
  /** The memory store under `memory` (recording its tenants), for facts written on another clock. */
  readonly memoryStore: MemoryStore;
  readonly archive: SessionArchive;
  readonly sessionObjects: ImmutableObjectStore;
  readonly sessionIndex: SessionIndex;
  readonly snapshots: WorkspaceSnapshots;
  readonly snapshotStores: SnapshotStores;
  /** A thread store as another instance has it (its own kept records). */
  anotherThreadStore(): ThreadStore;
  pruner(options?: Partial<PrunerOptions> & Instrumentation): RetentionPruner;
  verifier(options?: VerifierOptions): Verifier;
  /** The tenant's thread space, uninstrumented. */
  threadSpace(tenant: string): KeyValueStore;
  destroy(): Promise<void>;
}

export async function createRetentionWorld(
  backend: Backend,
  endpoints: { blobEndpoint: string; tableEndpoint: string },
): Promise<RetentionWorld> {
  let base: KeyValueStoreFactory;
  let sessionObjects: ImmutableObjectStore;
  let snapshotObjects: (tenant: string) => ImmutableObjectStore;
  let memoryStore: MemoryStore;
  const cleanups: (() => Promise<unknown>)[] = [];
  const sessionTable = azuriteTable(endpoints.tableEndpoint);
  cleanups.push(() => sessionTable.deleteTable().catch(() => undefined));
  if (backend === 'local') {
    const dir = tempDir('retention');
    base = new LocalKeyValueStoreFactory(dir, MAX_VALUE_BYTES);
    sessionObjects = new LocalImmutableObjectStore(path.join(dir, 'sessions'), path.join(dir, 'tmp'));
    snapshotObjects = (tenant) =>
      new LocalImmutableObjectStore(path.join(dir, 'snapshots', tenant), path.join(dir, 'tmp'));
    memoryStore = new LocalMemoryStore(dir);
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
  } else {
    const service = new BlobServiceClient(
      endpoints.blobEndpoint,
      new StorageSharedKeyCredential(AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY),
    );
    const container = `r${randomUUID().replaceAll('-', '').slice(0, 20)}`;
    base = new BlobKeyValueStoreFactory(service, container, MAX_VALUE_BYTES, STORAGE_TIMEOUT_MS);
    const shared = service.getContainerClient(container);
    sessionObjects = new BlobImmutableObjectStore(shared, 'sessions/', STORAGE_TIMEOUT_MS);
    snapshotObjects = (tenant) =>
      new BlobImmutableObjectStore(
        shared,
        `snapshots/${createHash('sha256').update(tenant).digest('hex').slice(0, 32)}/`,
        STORAGE_TIMEOUT_MS,
      );
    const memoryTable = azuriteTable(endpoints.tableEndpoint);
    memoryStore = new TableMemoryStore(memoryTable, STORAGE_TIMEOUT_MS);
    cleanups.push(() => memoryTable.deleteTable().catch(() => undefined));
    cleanups.push(async () => {
      for await (const item of service.listContainers({ prefix: container })) {
        await service.getContainerClient(item.name).deleteIfExists();
      }
    });
  }
  const directory = new TenantDirectory(base);
  const kvStores = recordingKeyValueStores(base, directory);
  const sessionIndex = recordingSessionIndex(
    new TableSessionIndex(sessionTable, STORAGE_TIMEOUT_MS),
    directory,
  );
  const snapshotStores = recordingSnapshotStores({ forTenant: snapshotObjects }, directory);
  const recordedMemory = recordingMemoryStore(memoryStore, directory);
  const memory = new MemoryFacts({ store: recordedMemory });
  const policies = new RetentionPolicies(base, KEEP_EVERYTHING);
  const states = new PruneStates(base);
  const threadStore = () =>
    new ThreadStore({
      storeOf: (tenant) => kvStores.forSpace('threads', tenant),
      maxValueBytes: MAX_VALUE_BYTES,
    });
  const storesFor = (instrumentation: Instrumentation): RetentionStores => ({
    kvStores: instrumentedStores(kvStores, instrumentation),
    directory,
    policies,
    states,
    memory,
    sessions: plainArchiveStorage(instrumentedObjects(sessionObjects, instrumentation), sessionIndex),
    snapshots: {
      forTenant: (tenant) => instrumentedObjects(snapshotStores.forTenant(tenant), instrumentation),
    },
  });
  return {
    backend,
    kvStores,
    directory,
    policies,
    states,
    threads: threadStore(),
    memory,
    memoryStore: recordedMemory,
    archive: new SessionArchive(plainArchiveStorage(sessionObjects, sessionIndex)),
    sessionObjects,
    sessionIndex,
    snapshots: new WorkspaceSnapshots(snapshotStores, new TrustedSnapshotKeys(new Map(), base)),
    snapshotStores,
    anotherThreadStore: threadStore,
    pruner: (options = {}) =>
      retentionPruner(storesFor(options), {
        maxDeletes: options.maxDeletes ?? 1_000_000,
        maxMs: options.maxMs ?? 600_000,
        graceMs: options.graceMs ?? 0,
        ...(options.fullPassEveryMs === undefined ? {} : { fullPassEveryMs: options.fullPassEveryMs }),
        ...(options.clockMarginMs === undefined ? {} : { clockMarginMs: options.clockMarginMs }),
        ...(options.now === undefined ? {} : { now: options.now }),
      }),
    verifier: (options = {}) =>
      retentionVerifier({ ...storesFor({}), audit: auditingOff }, { graceMs: 0, ...options }),
    threadSpace: (tenant) => base.forSpace('threads', tenant),
    async destroy() {
      for (const cleanup of cleanups) await cleanup();
    },
  };
}
