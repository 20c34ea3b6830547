import { constants as fsConstants, promises as fs } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import path from 'node:path';

import { ConflictError } from '../../protocol/errors';
import { walkInKeyOrder } from '../../protocol/keyOrderWalk';
import {
  checkObject,
  checkPointerValue,
  checkPrefix,
  type DeleteOptions,
  MAX_OBJECT_BYTES,
  ObjectExistsError,
  type ObjectInfo,
  type PutResult,
  type RewritableObjectStore,
  type RewriteOutcome,
  type SwapResult,
} from '../immutableObjectStore';
import { KeyedMutex } from '../keyedMutex';
import { writeDurableTempFile } from './durableTempFile';
import {
  errnoOf,
  folderConflict,
  guarded,
  isAbsence,
  LocalKeyTree,
  makeParentFolders,
  mergeSorted,
  readFileNoFollow,
  syncFolder,
  unlinkDurably,
} from './localFiles';

/**
 * The local filesystem implementation: each key is the file of the same path under `root`
 * (`<dataDir>/sessions`), so an archive can be read with ordinary tools.
 *
 * - An object is written whole to a temp file under `tmpDir` (same filesystem, fsynced), then
 *   hard-linked to its key. `link` fails when the key exists, so a put never overwrites, also
 *   against another process, and a reader sees the whole object or nothing. Every put, swap,
 *   rewrite and delete is answered only after the key's folder is synced too.
 * - A pointer is replaced the same way (temp file, then `rename`), under a per-key lock of this
 *   process; its first value is linked, so two first writers cannot both win. As for the key/value
 *   store, one process serves one data folder (instances that share state use the Blob backend).
 * - A key with a segment over 255 bytes is kept in the parallel tree `longRoot` (default
 *   `<root>-long`, see {@link LocalKeyTree}).
 * - An object's `storedAt` is its file's modification time: the temp file is written once and
 *   linked, never written again. `delete` unlinks the file (under the pointer lock, so that it never
 *   interleaves with a pointer's move) and removes the folders it leaves empty; a put that races
 *   with that removal makes its folders again.
 * - `touch` sets the file's modification time to now (and syncs it), under the same lock as
 *   `delete`: a delete with `storedBefore` that read the old time has unlinked the file before the
 *   touch looks (the touch answers null), or reads the new time after it (and leaves the file).
 * - `rewrite` (the rewrap job's re-seal) replaces the file by a temp file and `rename`, under the
 *   same lock as `delete` (a deleted object is never written back), and gives the new file the old
 *   one's modification time, so `storedAt` stays when its bytes were first stored.
 */
export class LocalImmutableObjectStore implements RewritableObjectStore {
  private readonly tree: LocalKeyTree;

  constructor(
    private readonly root: string,
    private readonly tmpDir: string,
    longRoot = `${root}-long`,
    private readonly maxObjectBytes = MAX_OBJECT_BYTES,
  ) {
    // The data folder holds `tmp` beside the store's folders: no link below it is followed.
    this.tree = new LocalKeyTree(root, longRoot, path.dirname(tmpDir));
  }

  async put(key: string, bytes: Buffer): Promise<PutResult> {
    checkObject(key, bytes, this.maxObjectBytes);
    const file = this.pathOf(key);
    return guarded(async () => {
      await this.tree.refuseSymlinks(file);
      if (await this.tree.folderConflict(key)) throw folderConflict();
      const temp = await this.writeTemp(bytes);
      try {
        if (await this.placeNew(temp, file)) return { created: true };
      } finally {
        await fs.rm(temp, { force: true });
      }
      const stored = await this.readIfFile(file);
      if (stored === null)
        throw new ConflictError(`${key} is a folder of other objects; nothing was written`);
      if (!stored.equals(bytes)) throw new ObjectExistsError(key);
      return { created: false };
    });
  }

  async get(key: string): Promise<Buffer | null> {
    const file = this.pathOf(key);
    return guarded(() => this.readIfFile(file));
  }

  async head(key: string): Promise<ObjectInfo | null> {
    const file = this.pathOf(key);
    return guarded(async () => {
      const stat = await this.statIfFile(file);
      return stat === null ? null : { key, ...stat };
    });
  }

  async *list(prefix: string): AsyncIterable<ObjectInfo> {
    checkPrefix(prefix);
    // Start at the deepest folder the prefix names: listing one generation's blocks reads one folder.
    const folderKey = prefix.slice(0, prefix.lastIndexOf('/') + 1);
    const folder = path.join(this.root, ...folderKey.split('/').filter((segment) => segment !== ''));
    const found = await guarded(async () => {
      await this.tree.refuseSymlinks(folder);
      const [files, long] = await Promise.all([
        walkInKeyOrder(folder, { prefix: prefix.slice(folderKey.length), limit: Infinity }),
        this.tree.longKeys({ prefix, after: '', limit: Infinity }),
      ]);
      const keys = mergeSorted(
        files.map((file) => folderKey + file.key),
        long,
        Infinity,
      );
      const stats = await Promise.all(keys.map((key) => this.statIfFile(this.tree.fileOf(key))));
      return keys.map((key, index) => ({ key, stat: stats[index] ?? null }));
    });
    // A file gone between the listing and its size is not listed.
    for (const { key, stat } of found) if (stat !== null) yield { key, ...stat };
  }

  async readPointer(key: string): Promise<string | null> {
    const file = this.pathOf(key);
    return guarded(async () => (await this.readIfFile(file))?.toString('utf8') ?? null);
  }

  async swapPointer(key: string, expected: string | null, next: string | null): Promise<SwapResult> {
    if (next !== null) checkPointerValue(next);
    const file = this.pathOf(key);
    return guarded(() =>
      pointerLocks.run(file, async () => {
        const current = (await this.readIfFile(file))?.toString('utf8') ?? null;
        if (current !== expected) return { swapped: false, current };
        if (next === null) {
          if (current !== null) await this.unlink(file);
          return { swapped: true };
        }
        const temp = await this.writeTemp(Buffer.from(next, 'utf8'));
        try {
          if (expected === null) {
            if (!(await this.placeNew(temp, file))) {
              return { swapped: false, current: (await this.readIfFile(file))?.toString('utf8') ?? null };
            }
          } else {
            await fs.rename(temp, file);
            await syncFolder(path.dirname(file));
          }
          return { swapped: true };
        } finally {
          await fs.rm(temp, { force: true });
        }
      }),
    );
  }

  async delete(key: string, options: DeleteOptions = {}): Promise<boolean> {
    const file = this.pathOf(key);
    return guarded(() =>
      pointerLocks.run(file, async () => {
        const stat = await this.statIfFile(file);
        if (stat === null) return false;
        const { storedBefore } = options;
        if (storedBefore !== undefined && stat.storedAt.getTime() >= storedBefore.getTime()) return false;
        return this.unlink(file);
      }),
    );
  }

  async touch(key: string): Promise<ObjectInfo | null> {
    const file = this.pathOf(key);
    return guarded(() =>
      pointerLocks.run(file, async () => {
        if ((await this.statIfFile(file)) === null) return null;
        // No link is followed (the path was checked, and the last segment is opened without following).
        const handle = await fs.open(file, fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW);
        try {
          const now = new Date();
          await handle.utimes(now, now);
          await handle.sync();
          const stat = await handle.stat();
          return { key, size: stat.size, storedAt: stat.mtime };
        } finally {
          await handle.close();
        }
      }),
    );
  }

  async rewrite(key: string, transform: (stored: Buffer) => Buffer | null): Promise<RewriteOutcome> {
    const file = this.pathOf(key);
    return guarded(() =>
      pointerLocks.run(file, async (): Promise<RewriteOutcome> => {
        const [stored, stat] = await Promise.all([this.readIfFile(file), this.statIfFile(file)]);
        if (stored === null || stat === null) return 'absent';
        const next = transform(stored);
        if (next === null) return 'kept';
        // The old modification time is set before the temp file's sync, so that it survives a crash too.
        const temp = await this.writeTemp(next, (handle) => handle.utimes(stat.storedAt, stat.storedAt));
        try {
          await fs.rename(temp, file);
          await syncFolder(path.dirname(file));
          return 'replaced';
        } finally {
          await fs.rm(temp, { force: true });
        }
      }),
    );
  }

  private pathOf(key: string): string {
    return this.tree.fileOf(key);
  }

  /** Removes `file` and the folders that leaves empty (up to the root); false when it was absent. */
  private async unlink(file: string): Promise<boolean> {
    if (!(await unlinkDurably(file))) return false;
    const root = this.tree.rootOf(file);
    for (let folder = path.dirname(file); folder.startsWith(root + path.sep); folder = path.dirname(folder)) {
      try {
        await fs.rmdir(folder);
      } catch (error) {
        const code = errnoOf(error);
        if (code === 'ENOTEMPTY' || code === 'EEXIST' || code === 'ENOENT') break;
        throw error;
      }
    }
    return true;
  }

  /** Links `temp` to `file`; false when `file` exists. Makes missing parent folders. */
  private async placeNew(temp: string, file: string): Promise<boolean> {
    for (let attempt = 0; ; attempt++) {
      try {
        await fs.link(temp, file);
        await syncFolder(path.dirname(file));
        return true;
      } catch (error) {
        const code = errnoOf(error);
        if (code === 'EEXIST') return false;
        if (code === 'ENOENT' && attempt < 3) {
          await makeParentFolders(file);
          continue;
        }
        if (code === 'ENOTDIR' || code === 'EISDIR') throw folderConflict();
        throw error;
      }
    }
  }

  /** The bytes of `file`; null when absent or a folder; a symbolic link is refused. */
  private readIfFile(file: string): Promise<Buffer | null> {
    return readFileNoFollow(this.tree.base, file);
  }

  /** Size and storedAt of `file`; null when absent or no file; a symbolic link is refused. */
  private async statIfFile(file: string): Promise<{ size: number; storedAt: Date } | null> {
    await this.tree.refuseSymlinks(file);
    return statIfFile(file);
  }

  /** A new, durable temp file holding `bytes`; `finish` runs on it before the sync. */
  private async writeTemp(bytes: Buffer, finish?: (handle: FileHandle) => Promise<void>): Promise<string> {
    await this.tree.refuseSymlinks(this.tmpDir);
    return (await writeDurableTempFile(this.tmpDir, bytes, finish)).temp;
  }
}

const pointerLocks = new KeyedMutex();

async function statIfFile(file: string): Promise<{ size: number; storedAt: Date } | null> {
  try {
    const stat = await fs.lstat(file);
    return stat.isFile() ? { size: stat.size, storedAt: stat.mtime } : null;
  } catch (error) {
    if (isAbsence(error)) return null;
    throw error;
  }
}
