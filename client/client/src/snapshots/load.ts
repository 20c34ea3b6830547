import { createHash, type KeyObject, randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';

import { forEachLimited } from '@cairn-state/protocol/pool';
import {
  PART_BYTES,
  partCount,
  partSize,
  validateSnapshotId,
} from '@cairn-state/protocol/snapshots/identifiers';
import {
  parseManifest,
  type SnapshotFile,
  snapshotIdOf,
  type SnapshotManifest,
} from '@cairn-state/protocol/snapshots/manifest';
import { verifiesWith } from '@cairn-state/protocol/snapshots/signatures';

import type { SnapshotRoutes } from './routes.js';

/**
 * Loading a snapshot into a folder, all or nothing. Before anything is written the manifest is
 * checked, in this order: its SHA-256 equals the id the caller kept, its signature verifies with the
 * caller's public key, its version is 1, every path is valid (and no symlink leaves the workspace
 * unless allowed). Then every file is downloaded into a new staging folder beside the target
 * (same filesystem), its size and SHA-256 checked, its mode set; the symlinks are made last (so no
 * file is ever written through one); and only then is the staging folder renamed to the target.
 *
 * The target must be absent or an empty folder (rename replaces an empty folder atomically); a
 * non-empty target is refused before anything is downloaded. Whatever fails, the staging folder is
 * removed and the target is exactly as it was.
 */

export interface VerifiedSnapshot {
  readonly id: string;
  readonly manifest: SnapshotManifest;
}

export interface ManifestCheckOptions {
  readonly publicKey: KeyObject;
  /** The workspace the snapshot must belong to; without it the snapshot is found by its id alone. */
  readonly workspaceId?: string;
  readonly allowExternalSymlinks?: boolean;
}

export interface LoadOptions extends ManifestCheckOptions {
  /** Files downloaded at once (default 16). */
  readonly concurrency?: number;
  readonly onProgress?: (progress: { files: number; filesDone: number; bytes: number }) => void;
}

export interface LoadReport {
  readonly id: string;
  readonly workspaceId: string;
  readonly files: number;
  readonly symlinks: number;
  readonly bytes: number;
}

const DEFAULT_CONCURRENCY = 16;

/** Fetches a snapshot's manifest and checks it (hash, signature, version, paths), in that order. */
export async function fetchVerifiedManifest(
  api: SnapshotRoutes,
  id: string,
  options: ManifestCheckOptions,
): Promise<VerifiedSnapshot> {
  validateSnapshotId(id, 'snapshot id');
  const stored =
    options.workspaceId === undefined ? await api.find(id) : await api.read(options.workspaceId, id);
  if (stored === null) {
    throw new Error(
      `no snapshot ${id}${options.workspaceId === undefined ? '' : ` in workspace ${options.workspaceId}`}`,
    );
  }
  if (snapshotIdOf(stored.manifest) !== id) {
    throw new Error(`the stored manifest does not match snapshot id ${id} (its SHA-256 differs): refused`);
  }
  if (!verifiesWith(stored.manifest, stored.signature, options.publicKey)) {
    throw new Error(`the signature of snapshot ${id} does not verify with the public key given: refused`);
  }
  const manifest = parseManifest(stored.manifest, {
    allowExternalSymlinks: options.allowExternalSymlinks === true,
  });
  if (options.workspaceId !== undefined && manifest.workspaceId !== options.workspaceId) {
    throw new Error(
      `snapshot ${id} belongs to workspace ${manifest.workspaceId}, not ${options.workspaceId}`,
    );
  }
  return { id, manifest };
}

export async function loadSnapshot(
  api: SnapshotRoutes,
  id: string,
  dir: string,
  options: LoadOptions,
): Promise<LoadReport> {
  const target = path.resolve(dir);
  await checkTarget(target, dir);
  const { manifest } = await fetchVerifiedManifest(api, id, options);

  // A fresh folder beside the target, made with the default mode (as the target's would be).
  const staging = path.join(
    path.dirname(target),
    `.${path.basename(target)}.cairn-load-${randomBytes(6).toString('hex')}`,
  );
  await fs.mkdir(staging);
  try {
    let filesDone = 0;
    let bytes = 0;
    const folders = new FolderMaker();
    await forEachLimited(manifest.files, options.concurrency ?? DEFAULT_CONCURRENCY, async (file) => {
      await downloadFile(api, manifest.workspaceId, staging, file, folders);
      filesDone++;
      bytes += file.size;
      options.onProgress?.({ files: manifest.files.length, filesDone, bytes });
    });
    for (const link of manifest.symlinks) {
      const source = path.join(staging, ...link.source.split('/'));
      await folders.make(path.dirname(source));
      await fs.symlink(link.target, source);
    }
    try {
      await fs.rename(staging, target);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'ENOTEMPTY' || code === 'EEXIST' || code === 'ENOTDIR') {
        throw new Error(`${dir} is no longer an empty folder: nothing was loaded`, { cause: error });
      }
      throw error;
    }
  } catch (error) {
    await fs.rm(staging, { recursive: true, force: true });
    throw error;
  }
  await syncFolder(path.dirname(target));
  return {
    id,
    workspaceId: manifest.workspaceId,
    files: manifest.files.length,
    symlinks: manifest.symlinks.length,
    bytes: manifest.files.reduce((sum, file) => sum + file.size, 0),
  };
}

/** The target must be absent or an empty folder, in an existing folder. */
async function checkTarget(target: string, shown: string): Promise<void> {
  const parent = await fs.stat(path.dirname(target)).catch(() => null);
  if (parent === null || !parent.isDirectory())
    throw new Error(`the folder that would hold ${shown} does not exist`);
  const stat = await fs.lstat(target).catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return null;
    throw error;
  });
  if (stat === null) return;
  if (!stat.isDirectory()) throw new Error(`${shown} exists and is not a folder: nothing was loaded`);
  if ((await fs.readdir(target)).length > 0) {
    throw new Error(`${shown} is not empty: load into a new or empty folder (nothing was loaded)`);
  }
}

/** Downloads one file into `staging`, checking every part's size and the whole file's SHA-256. */
async function downloadFile(
  api: SnapshotRoutes,
  workspaceId: string,
  staging: string,
  file: SnapshotFile,
  folders: FolderMaker,
): Promise<void> {
  const destination = path.join(staging, ...file.path.split('/'));
  await folders.make(path.dirname(destination));
  const handle = await fs.open(destination, 'wx', 0o600);
  try {
    const hash = createHash('sha256');
    for (let part = 0; part < partCount(file.size); part++) {
      const bytes = await readPart(api, workspaceId, file, part);
      hash.update(bytes);
      let written = 0;
      while (written < bytes.length) {
        const { bytesWritten } = await handle.write(
          bytes,
          written,
          bytes.length - written,
          part * PART_BYTES + written,
        );
        written += bytesWritten;
      }
    }
    if (hash.digest('hex') !== file.sha256) {
      throw new Error(
        `${file.path}: its bytes do not match the manifest's SHA-256 (the stored snapshot is damaged): refused`,
      );
    }
    await handle.datasync();
  } finally {
    await handle.close();
  }
  await fs.chmod(destination, file.mode);
}

async function readPart(
  api: SnapshotRoutes,
  workspaceId: string,
  file: SnapshotFile,
  part: number,
): Promise<Buffer> {
  // The transport reads the body inside its attempt: a connection cut in the middle is read again.
  const bytes = await api.getPart(workspaceId, file.sha256, part);
  if (bytes === null) throw new Error(`${file.path}: part ${file.sha256}/${part} is not stored: refused`);
  const expected = partSize(file.size, part);
  if (bytes.length !== expected) {
    throw new Error(`${file.path}: part ${part} has ${bytes.length} bytes, not ${expected}: refused`);
  }
  return bytes;
}

/** Makes folders (with their parents) once each: a load of 2,000 files in 40 folders makes 40. */
class FolderMaker {
  private readonly made = new Map<string, Promise<unknown>>();

  make(folder: string): Promise<unknown> {
    let making = this.made.get(folder);
    if (making === undefined) {
      making = fs.mkdir(folder, { recursive: true });
      this.made.set(folder, making);
    }
    return making;
  }
}

/** Makes a rename in `folder` durable; a filesystem that cannot sync folders is left as it is. */
async function syncFolder(folder: string): Promise<void> {
  const handle = await fs.open(folder, 'r').catch(() => null);
  if (handle === null) return;
  try {
    await handle.sync();
  } catch {
    // Not every filesystem syncs a folder; the rename itself is done.
  } finally {
    await handle.close();
  }
}
