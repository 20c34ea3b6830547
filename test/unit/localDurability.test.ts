import { promises as fs } from 'node:fs';
import path from 'node:path';

import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';

import { LocalImmutableObjectStore } from '../../shared/storage/local/localImmutableObjectStore';
import { LocalKeyValueStoreFactory } from '../../shared/storage/local/localKeyValueStore';
import { LocalMemoryStore } from '../../shared/storage/local/localMemoryStore';
import { tempDir } from '../support/cleanup';
import { recordFolderSyncs } from '../support/folderSyncs';

/**
 * The local stores answer a write only once it survives a crash of the machine: the rename, link
 * or unlink is made durable by syncing the folder it changed (and every folder made for it into its
 * parent). A power cut cannot be simulated here; what is observed is that the folder syncs happen
 * before the write is answered (each folder opened as a directory and fsynced).
 */
describe('local stores sync the folders they change before answering', () => {
  /** Folders fsynced since the last reset (emptied in place: the spy holds this array). */
  let synced: string[] = [];
  beforeEach(() => {
    synced = recordFolderSyncs();
  });
  afterEach(() => {
    vi.restoreAllMocks();
  });

  /** Every folder from `top` down to `folder`, `folder` included. */
  const chain = (top: string, folder: string): string[] => {
    const folders: string[] = [];
    for (let current = folder; current.length >= top.length; current = path.dirname(current)) {
      folders.push(current);
      if (current === top) break;
    }
    return folders;
  };

  it('key/value: write, create-only write, append and delete (threads use the same store)', async () => {
    const dir = tempDir('durable-kv');
    const store = new LocalKeyValueStoreFactory(dir, 1024).forTenant('durable-kv-tenant');
    const folder = path.join(dir, 'kv', 'durable-kv-tenant', 'deep', 'er');

    await store.write('deep/er/first', Buffer.from('one'));
    // The key's folder and every folder made for it, into its parent, up to the data folder.
    expect(synced).toEqual(expect.arrayContaining(chain(dir, folder)));

    for (const operation of [
      () => store.write('deep/er/first', Buffer.from('two')),
      () => store.write('deep/er/second', Buffer.from('new'), { ifAbsent: true }),
      () => store.append('deep/er/second', Buffer.from('+more')),
      () => store.delete('deep/er/first'),
    ]) {
      synced.length = 0;
      await operation();
      expect(synced).toContain(folder);
    }
  });

  it('immutable objects (archives, snapshots): put, pointer swaps, rewrite, delete', async () => {
    const dir = tempDir('durable-objects');
    const root = path.join(dir, 'sessions');
    const store = new LocalImmutableObjectStore(root, path.join(dir, 'tmp'));
    const folder = path.join(root, 'sid-durable', 'objects');

    await store.put('sid-durable/objects/a', Buffer.from('object'));
    expect(synced).toEqual(expect.arrayContaining(chain(dir, folder)));

    for (const operation of [
      () => store.swapPointer('sid-durable/objects/latest', null, 'a'),
      () => store.swapPointer('sid-durable/objects/latest', 'a', 'b'),
      () => store.rewrite('sid-durable/objects/a', (stored) => Buffer.concat([stored, Buffer.from('!')])),
      () => store.delete('sid-durable/objects/a'),
    ]) {
      synced.length = 0;
      await operation();
      expect(synced).toContain(folder);
    }
  });

  it('memory facts: write and delete', async () => {
    const dir = tempDir('durable-memory');
    const store = new LocalMemoryStore(dir);
    const fact = {
      namespace: 'notes/durable',
      key: 'fact-1',
      value: Buffer.from('v'),
      createdAt: 1,
      updatedAt: 1,
      expiresAt: null,
      incarnation: null,
      outbox: null,
    };
    const stored = await store.write('durable-memory-tenant', fact, null);
    const files = (await fs.readdir(path.join(dir, 'memory'), { recursive: true })).filter((name) =>
      name.endsWith('.json'),
    );
    expect(files).toHaveLength(1);
    const folder = path.dirname(path.join(dir, 'memory', files[0] ?? ''));
    expect(synced).toEqual(expect.arrayContaining(chain(dir, folder)));

    synced.length = 0;
    await store.write('durable-memory-tenant', { ...fact, updatedAt: 2 }, stored.etag);
    expect(synced).toContain(folder);
    synced.length = 0;
    await store.delete('durable-memory-tenant', 'notes/durable', 'fact-1');
    expect(synced).toContain(folder);
  });
});
