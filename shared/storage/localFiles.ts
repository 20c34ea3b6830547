import { CairnError, ConflictError, StorageUnavailableError } from '../errors';

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
