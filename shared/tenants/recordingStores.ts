import type { MemoryStore } from '../memory/memoryStore';
import { validateKey } from '../protocol/keys';
import type { ImmutableObjectStore } from '../storage/immutableObjectStore';
import type { KeyValueStore, KeyValueStoreFactory } from '../storage/keyValueStore';
import type { SessionIndex } from '../storage/sessionIndex';
import type { TenantDirectory } from './tenantDirectory';

/** Each tenant's snapshot objects (the snapshots' `SnapshotStores`, structurally). */
interface SnapshotStores {
  forTenant(tenant: string): ImmutableObjectStore;
}

/**
 * Stores that record their tenant in the {@link TenantDirectory} before the tenant's first write
 * (see there). Reads, listings and deletes go straight through; only what can create data records
 * first. Wrapped once in the composition root, so that no domain can forget it.
 */

/** The key/value space records `kv`, the thread space `threads`. */
export function recordingKeyValueStores(
  inner: KeyValueStoreFactory,
  directory: TenantDirectory,
): KeyValueStoreFactory {
  return {
    kind: inner.kind,
    maxValueBytes: inner.maxValueBytes,
    forTenant: (tenant) => recordingStore(inner.forTenant(tenant), () => directory.record(tenant, 'kv')),
    forSpace: (space, tenant) =>
      recordingStore(inner.forSpace(space, tenant), () => directory.record(tenant, space)),
  };
}

function recordingStore(inner: KeyValueStore, record: () => Promise<void>): KeyValueStore {
  return {
    read: (key) => inner.read(key),
    head: (key) => inner.head(key),
    // A key the store refuses records nothing: it is checked (no I/O) before the record is made.
    write: async (key, value, conditions) => {
      validateKey(key);
      await record();
      return inner.write(key, value, conditions);
    },
    append: async (key, bytes, conditions) => {
      validateKey(key);
      await record();
      return inner.append(key, bytes, conditions);
    },
    delete: (key, conditions) => inner.delete(key, conditions),
    list: (options) => inner.list(options),
    listItems: (options) => inner.listItems(options),
  };
}

export function recordingMemoryStore(inner: MemoryStore, directory: TenantDirectory): MemoryStore {
  return {
    readIndex: (tenant) => inner.readIndex(tenant),
    changes: (tenant, since) => inner.changes(tenant, since),
    fetch: (tenant, ids) => inner.fetch(tenant, ids),
    createIndex: async (tenant, index) => {
      await directory.record(tenant, 'memory');
      return inner.createIndex(tenant, index);
    },
    get: (tenant, namespace, key) => inner.get(tenant, namespace, key),
    write: async (tenant, fact, ifEtag) => {
      await directory.record(tenant, 'memory');
      return inner.write(tenant, fact, ifEtag);
    },
    writeMany: async (tenant, writes) => {
      if (writes.length > 0) await directory.record(tenant, 'memory');
      return inner.writeMany(tenant, writes);
    },
    delete: (tenant, namespace, key, ifEtag) => inner.delete(tenant, namespace, key, ifEtag),
    // The feed's rows are the tenant's too (on Table Storage, in its partition).
    relist: async (tenant, ids) => {
      await directory.record(tenant, 'memory');
      return inner.relist(tenant, ids);
    },
    scan: (tenant, namespace, options) => inner.scan(tenant, namespace, options),
    headers: (tenant, namespace, options) => inner.headers(tenant, namespace, options),
    namespaces: (tenant, prefix, options) => inner.namespaces(tenant, prefix, options),
    deleteSubtree: (tenant, namespace, options) => inner.deleteSubtree(tenant, namespace, options),
    pruneExpired: (tenant, options) => inner.pruneExpired(tenant, options),
  };
}

/** A session's bytes are written only after its owner is claimed: the claim records `sessions`. */
export function recordingSessionIndex(inner: SessionIndex, directory: TenantDirectory): SessionIndex {
  return {
    ownerOf: (sessionId) => inner.ownerOf(sessionId),
    claim: async (sessionId, tenant) => {
      await directory.record(tenant, 'sessions');
      return inner.claim(sessionId, tenant);
    },
    get: (tenant, sessionId) => inner.get(tenant, sessionId),
    list: (tenant, options) => inner.list(tenant, options),
    update: (tenant, sessionId, decide) => inner.update(tenant, sessionId, decide),
    remove: (tenant, sessionId) => inner.remove(tenant, sessionId),
  };
}

export function recordingSnapshotStores(inner: SnapshotStores, directory: TenantDirectory): SnapshotStores {
  return {
    forTenant: (tenant) =>
      recordingObjectStore(inner.forTenant(tenant), () => directory.record(tenant, 'snapshots')),
  };
}

function recordingObjectStore(
  inner: ImmutableObjectStore,
  record: () => Promise<void>,
): ImmutableObjectStore {
  return {
    put: async (key, bytes) => {
      await record();
      return inner.put(key, bytes);
    },
    get: (key) => inner.get(key),
    head: (key) => inner.head(key),
    list: (prefix) => inner.list(prefix),
    readPointer: (key) => inner.readPointer(key),
    swapPointer: async (key, expected, next) => {
      await record();
      return inner.swapPointer(key, expected, next);
    },
    delete: (key, options) => inner.delete(key, options),
    touch: (key) => inner.touch(key),
  };
}
