import { constants, promises as fs } from 'node:fs';
import path from 'node:path';

import { afterEach, describe, expect, it, vi } from 'vitest';

import { LocalMemoryStore } from '../../shared/storage/local/localMemoryStore';
import { tempDir } from '../support/cleanup';

describe('local stores after a crash between two steps, and durability of every write', () => {
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it('memory: the vector index is synced into its folder, and that folder into the data folder', async () => {
    const synced: string[] = [];
    const open = fs.open.bind(fs);
    vi.spyOn(fs, 'open').mockImplementation(async (file, flags, mode) => {
      const handle = await open(file, flags, mode);
      if (typeof flags === 'number' && (flags & constants.O_DIRECTORY) !== 0) {
        const sync = handle.sync.bind(handle);
        handle.sync = async () => {
          await sync();
          synced.push(String(file));
        };
      }
      return handle;
    });
    const dir = tempDir('durable-index');
    const store = new LocalMemoryStore(dir);
    await store.createIndex('index-tenant', { dims: 3 });
    // The index decides the dimension count of every later vector: losing it in a crash would let
    // the next first vector make another index, beside vectors of the old one.
    expect(synced).toEqual(expect.arrayContaining([path.join(dir, 'memory-index'), dir]));
  });
});
