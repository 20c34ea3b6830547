import { promises as fs, readdirSync, symlinkSync } from 'node:fs';
import path from 'node:path';

import { afterEach, describe, expect, it, vi } from 'vitest';

import { ConflictError, IntegrityError, PreconditionFailedError } from '../../shared/protocol/errors';
import { LocalKeyValueStoreFactory } from '../../shared/storage/local/localKeyValueStore';
import { LocalMemorySnapshots } from '../../shared/storage/local/localMemorySnapshots';
import { LocalMemoryStore } from '../../shared/storage/local/localMemoryStore';
import { tempDir } from '../support/cleanup';
import { recordFolderSyncs } from '../support/folderSyncs';

describe('local stores after a crash between two steps, and durability of every write', () => {
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it('memory: the vector index is synced into its folder, and that folder into the data folder', async () => {
    const synced = recordFolderSyncs();
    const dir = tempDir('durable-index');
    const store = new LocalMemoryStore(dir);
    await store.createIndex('index-tenant', { dims: 3 });
    // The index decides the dimension count of every later vector: losing it in a crash would let
    // the next first vector make another index, beside vectors of the old one.
    expect(synced).toEqual(expect.arrayContaining([path.join(dir, 'memory-index'), dir]));
  });

  it('key/value: a folder left empty by a delete killed before removing it does not block its name as a key', async () => {
    const dir = tempDir('leftover-folder');
    const store = new LocalKeyValueStoreFactory(dir, 1024).forTenant('t1');
    await store.write('notes/old', Buffer.from('x'));
    // A delete unlinks the key's file, then removes the folders that leaves empty: killed between
    // the two, it leaves `notes/` empty (as here, where the second step is not run).
    await fs.unlink(path.join(dir, 'kv', 't1', 'notes', 'old'));
    expect((await store.list({ prefix: '', limit: 10 })).keys).toEqual([]);
    // No key is below `notes`, so it can be a key (as on Blob).
    await store.write('notes', Buffer.from('now a key'));
    expect((await store.read('notes'))?.value.toString()).toBe('now a key');
    await store.write('tasks/old', Buffer.from('x'));
    await fs.unlink(path.join(dir, 'kv', 't1', 'tasks', 'old'));
    await store.write('tasks', Buffer.from('created'), { ifAbsent: true });
    await store.append('tasks', Buffer.from('+'));
    expect((await store.read('tasks'))?.value.toString()).toBe('created+');
    // Killed before removing two folders: `deep/er/` is empty, `deep/` holds only it.
    await store.write('deep/er/old', Buffer.from('x'));
    await fs.unlink(path.join(dir, 'kv', 't1', 'deep', 'er', 'old'));
    await store.write('deep', Buffer.from('a key'));
    expect((await store.read('deep'))?.value.toString()).toBe('a key');
    // A folder that still holds a key stays one.
    await store.write('kept/a/b', Buffer.from('x'));
    await expect(store.write('kept', Buffer.from('y'))).rejects.toBeInstanceOf(ConflictError);
    expect((await store.read('kept/a/b'))?.value.toString()).toBe('x');
  });
});

describe('local stores and their temp folder', () => {
  it('keep writing after the temp folder is removed (clearing what crashes left there)', async () => {
    const dir = tempDir('tmp-removed');
    const store = new LocalKeyValueStoreFactory(dir, 1024).forTenant('t1');
    await store.write('k', Buffer.from('1'));
    // What a crash leaves in tmp/ is never read: an operator may clear it, folder and all.
    await fs.rm(path.join(dir, 'tmp'), { recursive: true, force: true });
    await store.write('k', Buffer.from('2'));
    await store.append('k', Buffer.from('3'));
    expect((await store.read('k'))?.value.toString()).toBe('23');
  });
});

describe('local key/value ETags', () => {
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it('a compare-and-swap on the ETag of a deleted version fails on the key created again, also within one millisecond', async () => {
    const store = new LocalKeyValueStoreFactory(tempDir('etag-aba'), 1024).forTenant('t1');
    // Writes within one millisecond (fast storage, or a clock stepped back) get consecutive stamps;
    // a deleted file's inode is commonly given to the next file made.
    vi.spyOn(Date, 'now').mockReturnValue(Date.now());
    const swappedOnAStaleVersion: string[] = [];
    for (let i = 0; i < 40; i++) {
      const deleted = await store.write('k', Buffer.from('A'));
      await store.delete('k');
      await store.write('k', Buffer.from('B'));
      try {
        await store.write('k', Buffer.from('C'), { ifMatch: deleted.etag });
        swappedOnAStaleVersion.push(deleted.etag);
      } catch (error) {
        if (!(error instanceof PreconditionFailedError)) throw error;
      }
      await store.delete('k');
    }
    expect(swappedOnAStaleVersion).toEqual([]);
  });
});

describe('local memory search snapshots and symbolic links', () => {
  it('never write, read or delete through a link in the data folder', async () => {
    const dataDir = tempDir('snapshot-links');
    const outside = tempDir('snapshot-outside');
    symlinkSync(outside, path.join(dataDir, 'memory-snapshots'));
    const snapshots = new LocalMemorySnapshots(dataDir);
    await expect(snapshots.write('t1', '', Buffer.from('cache'))).rejects.toBeInstanceOf(IntegrityError);
    expect(readdirSync(outside)).toEqual([]);
    await expect(snapshots.read('t1', '', 1024)).rejects.toBeInstanceOf(IntegrityError);
    await expect(snapshots.delete('t1', '')).rejects.toBeInstanceOf(IntegrityError);
    await expect(snapshots.list('t1')).rejects.toBeInstanceOf(IntegrityError);
  });
});

describe('local key/value durability with concurrent writers', () => {
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it('answers a write only once the folders its key is in are synced, also when another write made them', async () => {
    const dir = tempDir('durable-concurrent');
    // The data folder's sync (the entry of `kv/` made by the first write) is slow.
    const synced = recordFolderSyncs(async (folder) => {
      if (folder === dir) await new Promise((resolve) => setTimeout(resolve, 300));
    });
    const store = new LocalKeyValueStoreFactory(dir, 1024).forTenant('t1');
    const first = store.write('d/x', Buffer.from('x'));
    // The second write starts once the first has made the folders, before it has synced them.
    const folder = path.join(dir, 'kv', 't1', 'd');
    while (
      !(await fs.stat(folder).then(
        () => true,
        () => false,
      ))
    ) {
      await new Promise((resolve) => setTimeout(resolve, 1));
    }
    await store.write('d/y', Buffer.from('y'));
    // Answered: the entries on its path, down from the data folder, must be on disk.
    const answered = [...synced];
    await first;
    expect(answered).toEqual(
      expect.arrayContaining([dir, path.join(dir, 'kv'), path.join(dir, 'kv', 't1'), folder]),
    );
  });
});
