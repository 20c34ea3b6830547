import type { MemoryStore } from '../../shared/memory/memoryStore';

/**
 * A memory store that forwards every call to `inner`: tests extend it and replace the calls they
 * interfere with (an injected fault, another writer getting there first).
 */
export class DelegatingMemoryStore implements MemoryStore {
  constructor(protected readonly inner: MemoryStore) {}
  readIndex(...args: Parameters<MemoryStore['readIndex']>) {
    return this.inner.readIndex(...args);
  }
  changes(...args: Parameters<MemoryStore['changes']>) {
    return this.inner.changes(...args);
  }
  fetch(...args: Parameters<MemoryStore['fetch']>) {
    return this.inner.fetch(...args);
  }
  createIndex(...args: Parameters<MemoryStore['createIndex']>) {
    return this.inner.createIndex(...args);
  }
  get(...args: Parameters<MemoryStore['get']>) {
    return this.inner.get(...args);
  }
  write(...args: Parameters<MemoryStore['write']>) {
    return this.inner.write(...args);
  }
  writeMany(...args: Parameters<MemoryStore['writeMany']>) {
    return this.inner.writeMany(...args);
  }
  delete(...args: Parameters<MemoryStore['delete']>) {
    return this.inner.delete(...args);
  }
  relist(...args: Parameters<MemoryStore['relist']>) {
    return this.inner.relist(...args);
  }
  scan(...args: Parameters<MemoryStore['scan']>) {
    return this.inner.scan(...args);
  }
  headers(...args: Parameters<MemoryStore['headers']>) {
    return this.inner.headers(...args);
  }
  namespaces(...args: Parameters<MemoryStore['namespaces']>) {
    return this.inner.namespaces(...args);
  }
  deleteSubtree(...args: Parameters<MemoryStore['deleteSubtree']>) {
    return this.inner.deleteSubtree(...args);
  }
  pruneExpired(...args: Parameters<MemoryStore['pruneExpired']>) {
    return this.inner.pruneExpired(...args);
  }
}
