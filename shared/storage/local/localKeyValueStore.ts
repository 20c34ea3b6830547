import { constants, promises as fs } from 'node:fs';
import path from 'node:path';

import { PayloadTooLargeError, PreconditionFailedError } from '../../protocol/errors';
import { validatePrefix } from '../../protocol/keys';
import { checkConditions } from '../conditions';
import { KeyedMutex } from '../keyedMutex';
import type {
  InternalSpace,
  ItemPage,
  KeyValueStore,
  KeyValueStoreFactory,
  ListOptions,
  ListPage,
  StoredItem,
  StoredValue,
  WriteConditions,
  WriteResult,
} from '../keyValueStore';
import { decodeCursor, encodeCursor } from '../listCursor';
import { writeDurableTempFile } from './durableTempFile';
import {
  errnoOf,
  folderConflict,
  guarded,
  isAbsence,
  LocalKeyTree,
  makeParentFolders,
  symlinkFound,
  syncFolder,
  unlinkDurably,
} from './localFiles';

/**
 * The local filesystem implementation: each key is the file of the same path under
 * `<dataDir>/kv/<tenant>/`, so people can read it and the migration can copy it. An internal
 * space's keys live under `<dataDir>/<space>/<tenant>/` (e.g. `threads`), beside `kv`.
 *
 * - Writes never change a file in place: the new value goes to a temp file (fsynced), then
 *   replaces the key by `rename` (or `link`, which fails when the key exists, for create-only).
 *   A crash leaves the old value or the new one, never a torn one. A write, append or delete is
 *   answered only after the key's folder (and any folder made for it) is synced as well.
 * - ETags are versions, not content hashes: every write stamps its file with a modification time
 *   unique within the process and later than any before (µs), and the ETag is inode + that time.
 *   A→B→A therefore gives three ETags.
 * - Conditional writes and appends run under a per-key lock of this process. The local backend is
 *   for one process per data folder (`npm start`); instances that share state use the Blob backend.
 * - A key cannot also be the folder of another key: that write is a {@link ConflictError}. Deleting
 *   the last key of a folder removes the empty folders above it.
 * - A key with a segment over the filesystem's 255-byte name limit is kept in a parallel tree
 *   `<dataDir>/kv-long/<tenant>/` (see {@link LocalKeyTree}), so every valid key can be stored.
 * - No symbolic link below `<dataDir>` is ever followed: a request whose file, or a folder on its
 *   path, is a link is refused with 500 `integrity_error` naming it (see refuseSymlinks).
 */
export class LocalKeyValueStoreFactory implements KeyValueStoreFactory {
  readonly kind = 'local';
  private readonly tmpDir: string;

  constructor(
    private readonly dataDir: string,
    readonly maxValueBytes: number,
  ) {
    this.tmpDir = path.join(dataDir, 'tmp');
  }

  forTenant(tenant: string): KeyValueStore {
    return this.storeIn('kv', tenant);
  }

  forSpace(space: InternalSpace, tenant: string): KeyValueStore {
    return this.storeIn(space, tenant);
  }

  /** Keys under `<dataDir>/<folder>/<tenant>/`, long ones under `<dataDir>/<folder>-long/<tenant>/`. */
  private storeIn(folder: string, tenant: string): KeyValueStore {
    return new LocalKeyValueStore(
      new LocalKeyTree(
        path.join(this.dataDir, folder, tenant),
        path.join(this.dataDir, `${folder}-long`, tenant),
        this.dataDir,
      ),
      this.tmpDir,
      this.maxValueBytes,
    );
  }
}

/**
 * A store of Cairn's own under `<dataDir>/<folder>/` (long keys under `<dataDir>/<folder>-long/`),
 * with the key/value contract and its durability: the local session index and audit trail keep
 * their records in one.
 */
export function localInternalStore(dataDir: string, folder: string, maxValueBytes: number): KeyValueStore {
  return new LocalKeyValueStore(
    new LocalKeyTree(path.join(dataDir, folder), path.join(dataDir, `${folder}-long`), dataDir),
    path.join(dataDir, 'tmp'),
    maxValueBytes,
  );
}

/** One lock table per process: two store objects on the same folder must not race each other. */
const locks = new KeyedMutex();
let lastStampMicros = 0;

/**
 * A modification time (seconds) unique within this process and increasing. It is set in the middle
 * of its microsecond: Node cuts a time it sets down to whole microseconds, and seconds as a double
 * (about a quarter of a microsecond apart at today's dates) often fall just below a whole one, so
 * `n` and `n + 1` µs were both stored as `n`. Two writes within one millisecond then shared a
 * stamp, and a key deleted and created again (its new file given the freed inode) its old ETag.
 */
function nextStamp(): number {
  lastStampMicros = Math.max(Date.now() * 1000, lastStampMicros + 1);
  return (lastStampMicros + 0.5) / 1e6;
}

function etagOf(stat: { ino: bigint; mtimeNs: bigint }): string {
  return `"${stat.ino.toString(36)}-${stat.mtimeNs.toString(36)}"`;
}

class LocalKeyValueStore implements KeyValueStore {
  constructor(
    private readonly tree: LocalKeyTree,
    private readonly tmpDir: string,
    private readonly maxValueBytes: number,
  ) {}

  async read(key: string): Promise<StoredValue | null> {
    const file = this.pathOf(key);
    return guarded(async () => {
      await this.tree.refuseSymlinks(file);
      let handle: fs.FileHandle;
      try {
        handle = await fs.open(file, constants.O_RDONLY | constants.O_NOFOLLOW);
      } catch (error) {
        if (isAbsence(error)) return null;
        if (errnoOf(error) === 'ELOOP') throw symlinkFound(this.relative(file));
        throw error;
      }
      try {
        // Same descriptor for stat and read: files are replaced, never changed, so the pair agrees.
        const stat = await handle.stat({ bigint: true });
        if (!stat.isFile()) return null;
        return { value: await handle.readFile(), etag: etagOf(stat) };
      } finally {
        await handle.close();
      }
    });
  }

  async head(key: string): Promise<StoredItem | null> {
    const file = this.pathOf(key);
    return guarded(async () => {
      await this.tree.refuseSymlinks(file);
      return statItem(file);
    });
  }

  async write(key: string, value: Buffer, conditions: WriteConditions = {}): Promise<WriteResult> {
    const file = this.pathOf(key);
    return guarded(() =>
      locks.run(file, async () => {
        if (value.length > this.maxValueBytes)
          throw new PayloadTooLargeError(this.maxValueBytes, 'the value');
        await this.tree.refuseSymlinks(file);
        const current = await statItem(file);
        checkConditions(conditions, current);
        if (current === null && (await this.tree.folderConflict(key))) throw folderConflict();
        return this.replace(file, value, current, conditions.ifAbsent === true);
      }),
    );
  }

  async append(key: string, bytes: Buffer, conditions: WriteConditions = {}): Promise<WriteResult> {
    const file = this.pathOf(key);
    return guarded(() =>
      locks.run(file, async () => {
        const current = await this.read(key);
        const currentItem = current && { etag: current.etag, size: current.value.length };
        checkConditions(conditions, currentItem);
        if (currentItem === null && (await this.tree.folderConflict(key))) throw folderConflict();
        const size = (current?.value.length ?? 0) + bytes.length;
        if (size > this.maxValueBytes)
          throw new PayloadTooLargeError(this.maxValueBytes, 'the value after the append');
        const value = current === null ? bytes : Buffer.concat([current.value, bytes]);
        // Create-only when absent, so that even another process's first append is never overwritten.
        return this.replace(file, value, currentItem, currentItem === null);
      }),
    );
  }

  async delete(key: string, conditions: Pick<WriteConditions, 'ifMatch'> = {}): Promise<boolean> {
    const file = this.pathOf(key);
    return guarded(() =>
      locks.run(file, async () => {
        await this.tree.refuseSymlinks(file);
        const current = await statItem(file);
        checkConditions(conditions, current);
        if (current === null) return false;
        await unlinkDurably(file);
        await this.removeEmptyFolders(path.dirname(file));
        return true;
      }),
    );
  }

  async list(options: ListOptions): Promise<ListPage> {
    const prefix = options.prefix ?? '';
    validatePrefix(prefix);
    const after = options.cursor === undefined ? '' : decodeCursor(options.cursor, prefix);
    return guarded(async () => {
      // One more than asked tells whether another page exists.
      const keys = await this.tree.keys({ prefix, after, limit: options.limit + 1 });
      if (keys.length <= options.limit) return { keys, cursor: null };
      keys.length = options.limit;
      return { keys, cursor: encodeCursor(prefix, keys[keys.length - 1] ?? '') };
    });
  }

  async listItems(options: ListOptions): Promise<ItemPage> {
    const page = await this.list(options);
    return guarded(async () => {
      const stats = await Promise.all(page.keys.map((key) => statDetails(this.pathOf(key))));
      const items = page.keys.flatMap((key, index) => {
        const stat = stats[index];
        return stat === null || stat === undefined ? [] : [{ key, ...stat }];
      });
      return { items, cursor: page.cursor };
    });
  }

  private pathOf(key: string): string {
    return this.tree.fileOf(key);
  }

  /** `file`'s path inside the data folder, as messages name it. */
  private relative(file: string): string {
    return path.relative(this.tree.base, file).split(path.sep).join('/');
  }

  /** Puts `value` at `file` atomically; `createOnly` fails (412) when the key exists by then. */
  private async replace(
    file: string,
    value: Buffer,
    current: StoredItem | null,
    createOnly: boolean,
  ): Promise<WriteResult> {
    const { temp, etag } = await this.writeTemp(value);
    let placed = false;
    try {
      for (let attempt = 0; !placed; attempt++) {
        try {
          if (createOnly) await fs.link(temp, file);
          else await fs.rename(temp, file);
          placed = true;
        } catch (error) {
          const code = errnoOf(error);
          // No parent folder yet (or a concurrent delete just removed it, empty): make it, retry.
          if (code === 'ENOENT' && attempt < 3) {
            await makeParentFolders(file);
            continue;
          }
          if (code === 'EEXIST' && (await statItem(file)) !== null) {
            throw new PreconditionFailedError('the key exists');
          }
          // A folder stands at the key. One without a file holds no key: a delete killed before
          // removing the folders it emptied leaves it. It goes, and the key takes its place.
          const folderAtKey = code === 'EEXIST' || code === 'EISDIR' || code === 'ENOTEMPTY';
          if (folderAtKey && attempt < 3 && (await removeIfEmpty(file))) continue;
          if (folderAtKey || code === 'ENOTDIR') throw folderConflict();
          throw error;
        }
      }
      // Acknowledged only once the new entry is on disk too.
      await syncFolder(path.dirname(file));
    } finally {
      // A rename consumed the temp file; a link or a failure leaves it to remove.
      if (createOnly || !placed) await fs.rm(temp, { force: true });
    }
    return { etag, size: value.length, created: current === null };
  }

  /** Writes `value` to a new temp file, durable and stamped; its ETag survives the rename or link. */
  private async writeTemp(value: Buffer): Promise<{ temp: string; etag: string }> {
    await this.tree.refuseSymlinks(this.tmpDir);
    const { temp, extra: etag } = await writeDurableTempFile(this.tmpDir, value, async (handle) => {
      const stamp = nextStamp();
      await handle.utimes(stamp, stamp);
      return etagOf(await handle.stat({ bigint: true }));
    });
    return { temp, etag };
  }

  private async removeEmptyFolders(folder: string): Promise<void> {
    const root = this.tree.rootOf(folder);
    for (let current = folder; current.startsWith(root + path.sep); current = path.dirname(current)) {
      try {
        await fs.rmdir(current);
      } catch (error) {
        if (errnoOf(error) === 'ENOTEMPTY' || errnoOf(error) === 'EEXIST' || errnoOf(error) === 'ENOENT')
          return;
        throw error;
      }
    }
  }
}

/**
 * Removes the folder `folder` when no file is in it or below it (only empty folders, or nothing,
 * or it is gone); false when it holds a file (or a link), which stays.
 */
async function removeIfEmpty(folder: string): Promise<boolean> {
  let entries;
  try {
    entries = await fs.readdir(folder, { withFileTypes: true });
  } catch (error) {
    if (isAbsence(error)) return true;
    throw error;
  }
  for (const entry of entries) {
    if (!entry.isDirectory() || !(await removeIfEmpty(path.join(folder, entry.name)))) return false;
  }
  try {
    await fs.rmdir(folder);
    return true;
  } catch (error) {
    if (isAbsence(error)) return true;
    if (errnoOf(error) === 'ENOTEMPTY' || errnoOf(error) === 'EEXIST') return false;
    throw error;
  }
}

/** ETag, size and modification time (the write's stamp, see the class comment), or null when absent. */
async function statDetails(file: string): Promise<(StoredItem & { modifiedAt: Date }) | null> {
  try {
    const stat = await fs.lstat(file, { bigint: true });
    if (!stat.isFile()) return null;
    return {
      etag: etagOf(stat),
      size: Number(stat.size),
      modifiedAt: new Date(Number(stat.mtimeNs / 1_000_000n)),
    };
  } catch (error) {
    if (isAbsence(error)) return null;
    throw error;
  }
}

async function statItem(file: string): Promise<StoredItem | null> {
  try {
    const stat = await fs.lstat(file, { bigint: true });
    return stat.isFile() ? { etag: etagOf(stat), size: Number(stat.size) } : null;
  } catch (error) {
    if (isAbsence(error)) return null;
    throw error;
  }
}
