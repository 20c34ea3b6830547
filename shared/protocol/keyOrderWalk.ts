import { promises as fs } from 'node:fs';
import path from 'node:path';

/**
 * Walks a folder tree in the byte order of whole keys (relative POSIX paths), as a listing needs:
 * folders sort as `name/`, so `a-c` comes before `a/b` (`-` < `/`). Subtrees that cannot hold a key
 * after `after` with `prefix` are not entered, so a page costs what it returns, not the whole tree.
 * Symbolic links are reported, never followed. The recursion follows folders, so its depth is
 * bounded by a key's length (at most 512 segments in 1024 bytes), never by what files hold.
 */

export type WalkEntryKind = 'file' | 'symlink' | 'other';

export interface WalkEntry {
  readonly key: string;
  readonly kind: WalkEntryKind;
}

export interface WalkOptions {
  readonly prefix?: string;
  /** Only keys strictly after this one. */
  readonly after?: string;
  /** Stop after this many included entries. */
  readonly limit: number;
  /** Which entries count (default: regular files). */
  readonly include?: (entry: WalkEntry) => boolean;
}

export function compareKeys(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}

/**
 * The longest prefix `a` and `b` share, in whole UTF-16 units: every key that starts as both do
 * starts with it (the prefix of one listing that spans them).
 */
export function commonPrefix(a: string, b: string): string {
  let length = 0;
  while (length < a.length && length < b.length && a[length] === b[length]) length++;
  return a.slice(0, length);
}

/** The entries of `root` in key order; an absent root has none. */
export async function walkInKeyOrder(root: string, options: WalkOptions): Promise<WalkEntry[]> {
  const found: WalkEntry[] = [];
  const prefix = options.prefix ?? '';
  const after = options.after ?? '';
  const include = options.include ?? ((entry: WalkEntry) => entry.kind === 'file');

  async function walk(folder: string, folderKey: string): Promise<void> {
    let entries;
    try {
      entries = await fs.readdir(folder, { withFileTypes: true });
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      // ENAMETOOLONG: a folder whose name the filesystem cannot hold holds nothing.
      if (code === 'ENOENT' || code === 'ENOTDIR' || code === 'ENAMETOOLONG') return;
      throw error;
    }
    const children = entries
      .map((entry) => ({ entry, key: folderKey + entry.name + (entry.isDirectory() ? '/' : '') }))
      .sort((a, b) => compareKeys(a.key, b.key));
    for (const { entry, key } of children) {
      if (found.length >= options.limit) return;
      if (entry.isDirectory()) {
        const overlapsPrefix = key.startsWith(prefix) || prefix.startsWith(key);
        const allBeforeCursor = compareKeys(key, after) < 0 && !after.startsWith(key);
        if (overlapsPrefix && !allBeforeCursor) await walk(path.join(folder, entry.name), key);
      } else if (key.startsWith(prefix) && compareKeys(key, after) > 0) {
        const kind: WalkEntryKind = entry.isFile() ? 'file' : entry.isSymbolicLink() ? 'symlink' : 'other';
        const candidate = { key, kind };
        if (include(candidate)) found.push(candidate);
      }
    }
  }

  await walk(root, '');
  return found;
}
