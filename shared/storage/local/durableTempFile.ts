import { randomUUID } from 'node:crypto';
import { type FileHandle, mkdir, open, rm } from 'node:fs/promises';
import path from 'node:path';

const readyTmpDirs = new Set<string>();

/**
 * Writes `bytes` to a new file in `tmpDir`, synced to disk, ready to be renamed or linked into place
 * (the local stores' atomic write; the caller syncs the folder it is placed in, see syncFolder).
 * `finish` runs on the open file before the sync (e.g. to stamp it) and its result is returned.
 * The sync is a full fsync, not fdatasync: the stamp (modification time) a local ETag is made of
 * must survive a crash too. On failure the temp file is removed.
 */
export async function writeDurableTempFile<T = undefined>(
  tmpDir: string,
  bytes: Buffer,
  finish?: (handle: FileHandle) => Promise<T>,
): Promise<{ temp: string; extra: T }> {
  if (!readyTmpDirs.has(tmpDir)) {
    await mkdir(tmpDir, { recursive: true });
    readyTmpDirs.add(tmpDir);
  }
  const temp = path.join(tmpDir, randomUUID());
  let handle: FileHandle;
  try {
    handle = await open(temp, 'wx');
  } catch (error) {
    // The folder went since it was made (cleared with what crashes left in it): make it again.
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    await mkdir(tmpDir, { recursive: true });
    handle = await open(temp, 'wx');
  }
  try {
    await handle.writeFile(bytes);
    const extra = (finish === undefined ? undefined : await finish(handle)) as T;
    await handle.sync();
    return { temp, extra };
  } catch (error) {
    await rm(temp, { force: true });
    throw error;
  } finally {
    await handle.close();
  }
}
