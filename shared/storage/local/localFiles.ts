import { promises as fs } from 'node:fs';
import path from 'node:path';

import { CairnError, ConflictError, InvalidArgumentError, StorageUnavailableError } from '../../errors';
import { validateKey } from '../../keys';

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

/** The file of `key` under `root`: the key validated, and each segment within the filesystem's limit. */
export function localPathOf(root: string, key: string): string {
  validateKey(key);
  const segments = key.split('/');
  if (segments.some((segment) => Buffer.byteLength(segment, 'utf8') > MAX_SEGMENT_BYTES)) {
    throw new InvalidArgumentError(
      'key',
      `segments must be at most ${MAX_SEGMENT_BYTES} bytes on the local backend`,
    );
  }
  return path.join(root, ...segments);
}

/** Makes the folders above `file`; a key standing where a folder must be is a folderConflict. */
export async function makeParentFolders(file: string): Promise<void> {
  try {
    await fs.mkdir(path.dirname(file), { recursive: true });
  } catch (error) {
    const code = errnoOf(error);
    if (code === 'EEXIST' || code === 'ENOTDIR') throw folderConflict();
    throw error;
  }
}
