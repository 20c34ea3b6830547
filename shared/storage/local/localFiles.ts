import { constants, promises as fs } from 'node:fs';
import path from 'node:path';

import { CairnError, ConflictError, IntegrityError, StorageUnavailableError } from '../../protocol/errors';
import { compareKeys, walkInKeyOrder } from '../../protocol/keyOrderWalk';
import { validateKey } from '../../protocol/keys';

/** What the local stores (key/value and immutable objects) share about the filesystem. */

export function errnoOf(error: unknown): string | undefined {
  return (error as NodeJS.ErrnoException | undefined)?.code;
}

/** The file, or a folder on its path, does not exist. */
export function isAbsence(error: unknown): boolean {
  const code = errnoOf(error);
  return code === 'ENOENT' || code === 'ENOTDIR';
}

export function folderConflict(): ConflictError {
  return new ConflictError(
    'on the local backend a key cannot also be the folder of another key (e.g. "a" and "a/b"); nothing was written',
  );
}

/** Turns unexpected filesystem errors into StorageUnavailableError; Cairn's own pass through. */
export async function guarded<T>(operation: () => Promise<T>): Promise<T> {
  try {
    return await operation();
  } catch (error) {
    if (error instanceof CairnError) throw error;
    throw new StorageUnavailableError('the local store failed; retry later', { cause: error });
  }
}

/** Filesystems allow 255 bytes in one name. */
const MAX_SEGMENT_BYTES = 255;
/** Hex characters per folder of a long key's path (126 bytes of the key). */
const LONG_CHUNK = 252;
/** Ends the file name of a long key: `.` sorts before `/` and every hex digit, which keeps order. */
const LONG_FILE_SUFFIX = '.k';

/**
 * Where the keys of a local store live. A key whose segments all fit the filesystem's 255-byte
 * name limit is the file of the same path under `root`, so people can read it and the migration
 * can copy it. A key with a longer segment (valid: keys may have up to 1,024 bytes in one segment,
 * as on Blob) lives in a parallel tree under `longRoot`: the hex of its UTF-8 bytes cut into
 * folders of 252 characters, the last piece a file ending in `.k`. That path round-trips, and its
 * byte order is the key's byte order (hex keeps byte order; `.` < `/` < hex digits settles a key
 * that is the beginning of another), so a listing merges the two trees in key order.
 *
 * The rule that a key cannot also be the folder of another key holds across both trees
 * ({@link LocalKeyTree.folderConflict}).
 */
export class LocalKeyTree {
  /**
   * @param base the data folder the trees are in (default: `root`'s parent): no symbolic link is
   *   followed below it (see {@link refuseSymlinks}).
   */
  constructor(
    readonly root: string,
    readonly longRoot: string,
    readonly base = path.dirname(root),
  ) {}

  /** Refuses a symbolic link on `file`'s path below the data folder (see {@link refuseSymlinks}). */
  refuseSymlinks(file: string): Promise<void> {
    return refuseSymlinks(this.base, file);
  }

  /** The file of `key`; validates it first. */
  fileOf(key: string): string {
    validateKey(key);
    const segments = key.split('/');
    if (segments.every((segment) => Buffer.byteLength(segment, 'utf8') <= MAX_SEGMENT_BYTES)) {
      return path.join(this.root, ...segments);
    }
    return path.join(this.longRoot, ...longPath(key).split('/'));
  }

  /** The folder at which removing empty folders above a deleted key's file stops. */
  rootOf(file: string): string {
    return file.startsWith(this.longRoot + path.sep) ? this.longRoot : this.root;
  }

  /**
   * Keys (files) with `prefix` strictly after `after`, ascending, at most `limit`. A listing never
   * descends into a linked folder nor lists a link; the roots themselves must not be links.
   */
  async keys(options: { prefix: string; after: string; limit: number }): Promise<string[]> {
    await Promise.all([this.refuseSymlinks(this.root), this.refuseSymlinks(this.longRoot)]);
    const [plain, long] = await Promise.all([walkInKeyOrder(this.root, options), this.longKeys(options)]);
    return mergeSorted(
      plain.map((entry) => entry.key),
      long,
      options.limit,
    );
  }

  /** As {@link keys}, of the long tree only. */
  async longKeys(options: { prefix: string; after: string; limit: number }): Promise<string[]> {
    const files = await walkInKeyOrder(this.longRoot, {
      prefix: longPath(options.prefix, false),
      after: options.after === '' ? '' : longPath(options.after),
      limit: options.limit,
      include: (entry) => entry.kind === 'file' && entry.key.endsWith(LONG_FILE_SUFFIX),
    });
    return files.map((entry) => keyOfLongPath(entry.key));
  }

  /**
   * True when storing `key` would make a key the folder of another across the two trees: a
   * shorter key on its path is stored, or a key below it. (Within the plain tree the filesystem
   * itself refuses such writes; this covers what involves the long tree, which is usually absent.)
   */
  async folderConflict(key: string): Promise<boolean> {
    const segments = key.split('/');
    const long = segments.some((segment) => Buffer.byteLength(segment, 'utf8') > MAX_SEGMENT_BYTES);
    // A plain key's shorter keys are plain too: the filesystem refuses those conflicts itself.
    if (long) {
      for (let count = 1; count < segments.length; count++) {
        if (await isFile(this.fileOf(segments.slice(0, count).join('/')))) return true;
      }
    }
    // Keys below a long key are long; keys below a plain key may be either.
    if (!(await exists(this.longRoot))) return false;
    return (await this.longKeys({ prefix: `${key}/`, after: '', limit: 1 })).length > 0;
  }
}

/** The long-tree path of `key`: hex in folders of LONG_CHUNK characters, a file ending in `.k`. */
function longPath(key: string, asFile = true): string {
  const hex = Buffer.from(key, 'utf8').toString('hex');
  const pieces: string[] = [];
  for (let at = 0; at < hex.length; at += LONG_CHUNK) pieces.push(hex.slice(at, at + LONG_CHUNK));
  const joined = pieces.join('/');
  // A prefix ending exactly at a folder boundary matches the folder and a file of that name.
  return asFile ? joined + LONG_FILE_SUFFIX : joined;
}

function keyOfLongPath(file: string): string {
  return Buffer.from(file.slice(0, -LONG_FILE_SUFFIX.length).replaceAll('/', ''), 'hex').toString('utf8');
}

/** The first `limit` of two ascending lists, merged. */
export function mergeSorted(a: string[], b: string[], limit: number): string[] {
  if (b.length === 0) return a.slice(0, limit);
  const merged: string[] = [];
  let i = 0;
  let j = 0;
  while (merged.length < limit && (i < a.length || j < b.length)) {
    const next = j >= b.length || (i < a.length && compareKeys(a[i] ?? '', b[j] ?? '') < 0) ? a[i++] : b[j++];
    if (next !== undefined) merged.push(next);
  }
  return merged;
}

async function exists(folder: string): Promise<boolean> {
  try {
    await fs.stat(folder);
    return true;
  } catch (error) {
    if (isAbsence(error)) return false;
    throw error;
  }
}

async function isFile(file: string): Promise<boolean> {
  try {
    return (await fs.stat(file)).isFile();
  } catch (error) {
    if (isAbsence(error)) return false;
    throw error;
  }
}

/** Makes the folders above `file`; a key standing where a folder must be is a folderConflict. */
export async function makeParentFolders(file: string): Promise<void> {
  try {
    await makeFoldersDurably(path.dirname(file));
  } catch (error) {
    const code = errnoOf(error);
    if (code === 'EEXIST' || code === 'ENOTDIR') throw folderConflict();
    throw error;
  }
}

/**
 * Durability of the local stores: a write is acknowledged only once it survives a crash of the
 * process or of the machine. The new bytes are in a synced temp file ({@link writeDurableTempFile});
 * the rename, link or unlink that makes them the key's value changes a folder, and that change is
 * on disk only once the folder itself is synced ({@link syncFolder}); a folder made for the key is
 * synced into its own parent the same way ({@link makeFoldersDurably}).
 */

/**
 * Syncs `folder` (its entries: a rename, link or unlink into it) to disk, and waits for the folders
 * on its path that another write of this process made and is still syncing into their parents
 * ({@link makeFoldersDurably}): a write that found its folders made already is answered only once
 * they are on disk too. A folder that is gone has nothing to sync: a concurrent deletion emptied
 * and removed it, the entry with it.
 */
export async function syncFolder(folder: string): Promise<void> {
  await syncOne(folder);
  for (let current = folder; ; current = path.dirname(current)) {
    const made = foldersSyncing.get(current);
    if (made !== undefined && !(await made)) {
      throw new Error(`the folder ${current} was made but could not be synced`);
    }
    if (path.dirname(current) === current) return;
  }
}

/** Folders being made by {@link makeFoldersDurably}, each with whether their entries got synced. */
const foldersSyncing = new Map<string, Promise<boolean>>();

async function syncOne(folder: string): Promise<void> {
  let handle: fs.FileHandle;
  try {
    handle = await fs.open(folder, constants.O_RDONLY | constants.O_DIRECTORY);
  } catch (error) {
    if (isAbsence(error)) return;
    throw error;
  }
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** `mkdir -p folder`, with every folder it made synced into its parent. */
export async function makeFoldersDurably(folder: string): Promise<void> {
  const first = await fs.mkdir(folder, { recursive: true });
  if (first === undefined) return;
  // `first` is the topmost folder made: its parent and every folder from it down gained an entry.
  const made: string[] = [];
  for (let current = folder; current.length >= first.length; current = path.dirname(current)) {
    made.push(current);
    if (current === first) break;
  }
  const synced = (async () => {
    await syncOne(path.dirname(first));
    for (const current of made) if (current !== folder) await syncOne(current);
  })();
  const outcome = synced.then(
    () => true,
    () => false,
  );
  for (const current of made) foldersSyncing.set(current, outcome);
  try {
    await synced;
  } finally {
    for (const current of made) if (foldersSyncing.get(current) === outcome) foldersSyncing.delete(current);
  }
}

/** Removes `file` and syncs its folder; false when it was absent. */
export async function unlinkDurably(file: string): Promise<boolean> {
  try {
    await fs.unlink(file);
  } catch (error) {
    if (isAbsence(error)) return false;
    throw error;
  }
  await syncFolder(path.dirname(file));
  return true;
}

/**
 * Refuses a symbolic link anywhere on the path of `file` below `base` (the data folder; `base`
 * itself and the folders above it are the operator's choice): every component is checked with
 * `lstat`, up to the first one that does not exist. The local stores never read or write through a
 * link planted in their data folder, which could reach any file the process may write. A link there
 * is damage to the storage, not the caller's fault: {@link symlinkFound}. (A link made between this
 * check and the open that follows is not seen; the file itself is also opened with O_NOFOLLOW where
 * the store reads it.)
 */
export async function refuseSymlinks(base: string, file: string): Promise<void> {
  const relative = path.relative(base, file);
  if (relative === '' || relative.startsWith('..') || path.isAbsolute(relative)) return;
  const segments = relative.split(path.sep);
  const stats = await Promise.all(
    segments.map((_, index) =>
      fs.lstat(path.join(base, ...segments.slice(0, index + 1))).catch((error: unknown) => {
        // A name over the filesystem's limit cannot exist (nor be a link).
        if (isAbsence(error) || errnoOf(error) === 'ENAMETOOLONG') return null;
        throw error;
      }),
    ),
  );
  for (let index = 0; index < stats.length; index++) {
    const stat = stats[index];
    if (stat === null || stat === undefined) return;
    if (stat.isSymbolicLink()) throw symlinkFound(segments.slice(0, index + 1).join('/'));
  }
}

/**
 * 500 `integrity_error`: a symbolic link in the data folder. Not 503: retrying changes nothing
 * until an operator removes the link. `relative` is the link's path inside the data folder.
 */
export function symlinkFound(relative: string): IntegrityError {
  return new IntegrityError(
    `the local store found a symbolic link at ${relative} in its data folder and never follows one: nothing was read or written (remove the link)`,
  );
}

/**
 * The bytes of `file`, opened with O_NOFOLLOW (a link is {@link symlinkFound}, after
 * {@link refuseSymlinks} checked the folders above it); null when it is absent or a folder.
 */
export async function readFileNoFollow(base: string, file: string): Promise<Buffer | null> {
  await refuseSymlinks(base, file);
  let handle: fs.FileHandle;
  try {
    handle = await fs.open(file, constants.O_RDONLY | constants.O_NOFOLLOW);
  } catch (error) {
    if (isAbsence(error)) return null;
    if (errnoOf(error) === 'ELOOP') throw symlinkFound(path.relative(base, file).split(path.sep).join('/'));
    throw error;
  }
  try {
    if (!(await handle.stat()).isFile()) return null;
    return await handle.readFile();
  } finally {
    await handle.close();
  }
}
