import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';

import { describe, expect, it } from 'vitest';

import { ConflictError, IntegrityError, PreconditionFailedError } from '../../shared/protocol/errors';
import { LocalImmutableObjectStore } from '../../shared/storage/local/localImmutableObjectStore';
import { LocalKeyValueStoreFactory } from '../../shared/storage/local/localKeyValueStore';
import { LocalMemoryStore } from '../../shared/storage/local/localMemoryStore';
import { tempDir } from '../support/cleanup';

/** What the local implementation promises beyond the shared contract: files, folders, crashes. */
describe('local filesystem store', () => {
  const newDir = () => tempDir('local');

  it('keeps each key as the file of the same path, readable by people and the migration', async () => {
    const dir = newDir();
    const store = new LocalKeyValueStoreFactory(dir, 1024).forTenant('t1');
    await store.write('interactions/2026-01-01.jsonl', Buffer.from('{"a":1}\n'));
    expect(existsSync(path.join(dir, 'kv', 't1', 'interactions', '2026-01-01.jsonl'))).toBe(true);
  });

  it('leaves no temp file behind, also after lost compare-and-swaps', async () => {
    const dir = newDir();
    const store = new LocalKeyValueStoreFactory(dir, 1024).forTenant('t1');
    await store.write('k', Buffer.from('1'));
    for (let i = 0; i < 5; i++) {
      await expect(store.write('k', Buffer.from('x'), { ifAbsent: true })).rejects.toBeInstanceOf(
        PreconditionFailedError,
      );
      await store.append('k', Buffer.from('y'));
    }
    expect(readdirSync(path.join(dir, 'tmp'))).toEqual([]);
  });

  it('keeps the folder rule across keys with and without segments over 255 bytes', async () => {
    const store = new LocalKeyValueStoreFactory(newDir(), 1024).forTenant('t1');
    const long = 'l'.repeat(300);
    await store.write('a', Buffer.from('plain'));
    await expect(store.write(`a/${long}`, Buffer.from('x'))).rejects.toBeInstanceOf(ConflictError);
    await store.write(`b/${long}`, Buffer.from('long'));
    await expect(store.write('b', Buffer.from('x'))).rejects.toBeInstanceOf(ConflictError);
    await expect(store.append(`b/${long}/c`, Buffer.from('x'))).rejects.toBeInstanceOf(ConflictError);
    expect(await store.read('b')).toBeNull();
    await store.delete(`b/${long}`);
    await store.write('b', Buffer.from('now free'));
    expect((await store.read('b'))?.value.toString()).toBe('now free');
  });

  it('removes folders left empty by a delete, so their name can become a key', async () => {
    const dir = newDir();
    const store = new LocalKeyValueStoreFactory(dir, 1024).forTenant('t1');
    await store.write('a/b/c', Buffer.from('deep'));
    await store.write('a/x', Buffer.from('sibling'));
    await store.delete('a/b/c');
    expect(existsSync(path.join(dir, 'kv', 't1', 'a', 'b'))).toBe(false);
    expect(existsSync(path.join(dir, 'kv', 't1', 'a'))).toBe(true);
    await store.write('a/b', Buffer.from('now a key'));
    expect((await store.read('a/b'))?.value.toString()).toBe('now a key');
  });

  it('never shows a torn value after the writing process is killed mid-write', async () => {
    const dir = newDir();
    const writer = path.resolve('dist/test/fixtures/crashWriter.js');
    for (let crash = 0; crash < 6; crash++) {
      const child = spawn(process.execPath, [writer, dir], { stdio: ['ignore', 'pipe', 'inherit'] });
      const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
      await new Promise<void>((resolve) => child.stdout.once('data', () => resolve()));
      await new Promise((resolve) => setTimeout(resolve, 50 + crash * 40));
      child.kill('SIGKILL');
      // Killed, not ended on its own: an error in the writer would prove nothing.
      expect(await exited).toBeNull();

      const store = new LocalKeyValueStoreFactory(dir, 4 * 1024 * 1024).forTenant('crash');
      const value = await store.read('value');
      if (value !== null) {
        expect(value.value.length).toBe(1024 * 1024);
        expect(new Set(value.value).size).toBe(1);
      }
      const log = await store.read('log');
      if (log !== null) {
        expect(log.value.length % (64 * 1024)).toBe(0);
        for (let offset = 0; offset < log.value.length; offset += 64 * 1024) {
          expect(new Set(log.value.subarray(offset, offset + 64 * 1024)).size).toBe(1);
        }
      }
    }
  });
});

/** No local store reads or writes through a symbolic link planted below the data folder. */
describe('local stores and symbolic links in the data folder', () => {
  /** A data folder and a folder outside it holding one file the stores must never reach. */
  const planted = () => {
    const dataDir = tempDir('links');
    const outside = tempDir('outside');
    writeFileSync(path.join(outside, 'secret'), 'outside');
    const untouched = () => {
      expect(readdirSync(outside)).toEqual(['secret']);
      expect(readFileSync(path.join(outside, 'secret'), 'utf8')).toBe('outside');
    };
    return { dataDir, outside, untouched };
  };
  const refusal = async (promise: Promise<unknown>, link: string) => {
    const error = await promise.then(
      () => new Error('expected a refusal'),
      (caught: unknown) => caught,
    );
    expect(error).toBeInstanceOf(IntegrityError);
    expect((error as Error).message).toContain(`symbolic link at ${link} `);
  };

  it('key/value and thread spaces: a linked folder or file on a key path, the tenant folder or tmp', async () => {
    const { dataDir, outside, untouched } = planted();
    const factory = new LocalKeyValueStoreFactory(dataDir, 1024);
    const store = factory.forSpace('threads', 't1');
    await store.write('own/value', Buffer.from('mine'));
    symlinkSync(outside, path.join(dataDir, 'threads', 't1', 'dir'));
    symlinkSync(path.join(outside, 'secret'), path.join(dataDir, 'threads', 't1', 'file'));
    for (const key of ['dir/secret', 'dir/new']) {
      await refusal(store.read(key), 'threads/t1/dir');
      await refusal(store.head(key), 'threads/t1/dir');
      await refusal(store.write(key, Buffer.from('x')), 'threads/t1/dir');
      await refusal(store.append(key, Buffer.from('x')), 'threads/t1/dir');
      await refusal(store.delete(key), 'threads/t1/dir');
    }
    await refusal(store.read('file'), 'threads/t1/file');
    await refusal(store.head('file'), 'threads/t1/file');
    await refusal(store.write('file', Buffer.from('x')), 'threads/t1/file');
    await refusal(store.write('file', Buffer.from('x'), { ifAbsent: true }), 'threads/t1/file');
    await refusal(store.delete('file'), 'threads/t1/file');
    // A listing neither lists a link nor descends into a linked folder.
    expect((await store.list({ limit: 10 })).keys).toEqual(['own/value']);

    // The tenant's folder itself a link.
    symlinkSync(outside, path.join(dataDir, 'kv'));
    await refusal(factory.forTenant('t2').write('a', Buffer.from('x')), 'kv');
    await refusal(factory.forTenant('t2').list({ limit: 10 }), 'kv');
    untouched();
    // The temp folder a link: no value is staged outside.
    rmSync(path.join(dataDir, 'tmp'), { recursive: true });
    symlinkSync(outside, path.join(dataDir, 'tmp'));
    await refusal(
      new LocalKeyValueStoreFactory(dataDir, 1024).forSpace('threads', 't1').write('b', Buffer.from('x')),
      'tmp',
    );
    untouched();
    expect((await store.read('own/value'))?.value.toString()).toBe('mine');
  });

  it('immutable objects and memory facts: a linked folder on the path is refused', async () => {
    const { dataDir, outside, untouched } = planted();
    const objects = new LocalImmutableObjectStore(path.join(dataDir, 'sessions'), path.join(dataDir, 'tmp'));
    await objects.put('s1/a', Buffer.from('a'));
    symlinkSync(outside, path.join(dataDir, 'sessions', 's2'));
    await refusal(objects.put('s2/b', Buffer.from('b')), 'sessions/s2');
    await refusal(objects.get('s2/secret'), 'sessions/s2');
    await refusal(objects.readPointer('s2/secret'), 'sessions/s2');
    await refusal(objects.swapPointer('s2/p', null, 'x'), 'sessions/s2');
    await refusal(objects.delete('s2/secret'), 'sessions/s2');

    symlinkSync(outside, path.join(dataDir, 'memory'));
    const memory = new LocalMemoryStore(dataDir);
    const fact = {
      namespace: 'n',
      key: 'k',
      createdAt: 1,
      updatedAt: 1,
      expiresAt: null,
      incarnation: null,
      outbox: null,
      value: Buffer.from('v'),
    };
    await refusal(memory.write('t1', fact, null), 'memory');
    await refusal(memory.get('t1', 'n', 'k'), 'memory');
    untouched();
  });
});
