import { promises as fs } from 'node:fs';
import path from 'node:path';

import {
  digestOfSnapshotName,
  type MemorySnapshotStore,
  snapshotName,
  snapshotTenantDir,
} from '../../memory/searchSnapshot';
import { writeDurableTempFile } from './durableTempFile';
import { guarded, isAbsence, makeFoldersDurably, readFileNoFollow, refuseSymlinks } from './localFiles';

/**
 * Memory search snapshots (shared/memory/searchSnapshot.ts) as files
 * `<dataDir>/memory-snapshots/<32 hex digits of SHA-256(tenant)>/<subtree digest or root>`, each
 * replaced whole by a temp file and `rename` (a reader sees the old file or the new one, never a
 * part). No folder sync: a snapshot lost in a crash is only a cache gone. As every local store, it
 * never follows a symbolic link below the data folder (see refuseSymlinks).
 */
export class LocalMemorySnapshots implements MemorySnapshotStore {
  private readonly root: string;
  private readonly tmpDir: string;

  constructor(private readonly dataDir: string) {
    this.root = path.join(dataDir, 'memory-snapshots');
    this.tmpDir = path.join(dataDir, 'tmp');
  }

  async read(tenant: string, digest: string, maxBytes: number): Promise<Buffer | null> {
    return guarded(async () => {
      const file = this.file(tenant, digest);
      await refuseSymlinks(this.dataDir, file);
      try {
        if ((await fs.lstat(file)).size > maxBytes) return null;
      } catch (error) {
        if (isAbsence(error)) return null;
        throw error;
      }
      return readFileNoFollow(this.dataDir, file);
    });
  }

  async write(tenant: string, digest: string, bytes: Buffer): Promise<void> {
    await guarded(async () => {
      const file = this.file(tenant, digest);
      await Promise.all([refuseSymlinks(this.dataDir, file), refuseSymlinks(this.dataDir, this.tmpDir)]);
      const { temp } = await writeDurableTempFile(this.tmpDir, bytes);
      try {
        await makeFoldersDurably(path.dirname(file));
        await fs.rename(temp, file);
      } catch (error) {
        await fs.rm(temp, { force: true });
        throw error;
      }
    });
  }

  async delete(tenant: string, digest: string): Promise<void> {
    await guarded(async () => {
      const file = this.file(tenant, digest);
      await refuseSymlinks(this.dataDir, file);
      await fs.rm(file, { force: true });
    });
  }

  async list(tenant: string): Promise<{ digest: string; storedAt: Date }[]> {
    return guarded(async () => {
      const folder = path.join(this.root, snapshotTenantDir(tenant));
      await refuseSymlinks(this.dataDir, folder);
      let names: string[];
      try {
        names = await fs.readdir(folder);
      } catch (error) {
        if (isAbsence(error)) return [];
        throw error;
      }
      const found: { digest: string; storedAt: Date }[] = [];
      for (const name of names) {
        const digest = digestOfSnapshotName(name);
        if (digest === null) continue;
        try {
          found.push({ digest, storedAt: (await fs.lstat(path.join(folder, name))).mtime });
        } catch (error) {
          if (!isAbsence(error)) throw error;
        }
      }
      return found;
    });
  }

  private file(tenant: string, digest: string): string {
    return path.join(this.root, snapshotTenantDir(tenant), snapshotName(digest));
  }
}
