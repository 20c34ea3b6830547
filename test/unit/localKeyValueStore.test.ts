import { spawn } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';

import { describe, expect, it } from 'vitest';

import { ConflictError, PreconditionFailedError } from '../../shared/errors';
import { LocalKeyValueStoreFactory } from '../../shared/storage/local/localKeyValueStore';
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
