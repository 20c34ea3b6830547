import { constants, promises as fs } from 'node:fs';

import { vi } from 'vitest';

/**
 * Records every folder the local stores fsync (a folder opened as a directory, then synced), in
 * the order the syncs end; `beforeSync` may hold one back (a slow disk). The spy stays until
 * `vi.restoreAllMocks()`.
 */
export function recordFolderSyncs(beforeSync?: (folder: string) => Promise<void>): string[] {
  const synced: string[] = [];
  const open = fs.open.bind(fs);
  vi.spyOn(fs, 'open').mockImplementation(async (file, flags, mode) => {
    const handle = await open(file, flags, mode);
    if (typeof flags === 'number' && (flags & constants.O_DIRECTORY) !== 0) {
      const sync = handle.sync.bind(handle);
      handle.sync = async () => {
        await beforeSync?.(String(file));
        await sync();
        synced.push(String(file));
      };
    }
    return handle;
  });
  return synced;
}
