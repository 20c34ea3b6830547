import { randomBytes } from 'node:crypto';
import { constants, promises as fs } from 'node:fs';
import path from 'node:path';

import { BLOCK_BYTES } from '@cairn-state/protocol/archive/identifiers';
import type { Manifest, ManifestFile } from '@cairn-state/protocol/archive/manifest';
import { validateKey } from '@cairn-state/protocol/keys';
import { forEachLimited } from '@cairn-state/protocol/pool';

import { failure, type HttpReply } from '../transport.js';
import { BoundaryHash } from './boundaryHash.js';
import { type UploadedFile, writeUploadState } from './sessionDirectory.js';

/**
 * The restore half: a checkpoint's files downloaded into an empty (or absent) directory. Every file
 * is streamed to a staging directory beside it and checked against its SHA-256, and only a
 * complete, verified tree is renamed into place, so a failed restore leaves nothing half-written.
 */

/** Answers the GET of one file of the checkpoint (retried by the caller's transport). */
export type FetchFile = (file: ManifestFile) => Promise<HttpReply>;

/**
 * Throws unless `dir` is empty or absent; resolves with its absolute path. A symbolic link (even to
 * an empty folder) is refused: a restore never writes through one, and a folder holding a link is
 * not empty. The folders above `dir` are the caller's choice.
 */
export async function emptyTarget(dir: string): Promise<string> {
  const target = path.resolve(dir);
  const stat = await fs.lstat(target).catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return null;
    throw error;
  });
  if (stat?.isSymbolicLink() === true) {
    throw new Error(
      `${dir} is a symbolic link: restore into an empty or new directory (nothing was written)`,
    );
  }
  const existing = await fs.readdir(target).catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return [];
    throw error;
  });
  if (existing.length > 0) throw new Error(`${dir} is not empty: restore into an empty or new directory`);
  return target;
}

/** Downloads every file of `manifest` (`concurrency` at once) and moves the verified tree to `target`. */
export async function restoreTree(
  target: string,
  sessionId: string,
  manifest: Manifest,
  concurrency: number,
  fetchFile: FetchFile,
): Promise<void> {
  for (const file of manifest.files) validateKey(file.path, 'path');
  const staging = path.join(
    path.dirname(target),
    `.${path.basename(target)}.restore-${randomBytes(6).toString('hex')}`,
  );
  await fs.mkdir(staging, { recursive: true });
  try {
    const uploaded: Record<string, UploadedFile> = {};
    await forEachLimited(manifest.files, concurrency, async (file) => {
      uploaded[file.path] = await restoreFile(file, staging, fetchFile);
    });
    // What was restored counts as uploaded: the next publish from here is incremental.
    await writeUploadState(staging, {
      version: 1,
      session: sessionId,
      checkpointId: manifest.checkpointId,
      files: uploaded,
    });
    await fs.rmdir(target).catch((error: NodeJS.ErrnoException) => {
      if (error.code !== 'ENOENT') throw error;
    });
    await fs.rename(staging, target);
  } catch (error) {
    await fs.rm(staging, { recursive: true, force: true });
    throw error;
  }
}

/** Streams one file into `staging`, checking size and SHA-256; retries a cut download. */
async function restoreFile(file: ManifestFile, staging: string, fetchFile: FetchFile): Promise<UploadedFile> {
  const destination = path.join(staging, ...file.path.split('/'));
  await fs.mkdir(path.dirname(destination), { recursive: true });
  let lastError: unknown;
  for (let attempt = 0; attempt < 3; attempt++) {
    const response = await fetchFile(file);
    if (response.status !== 200) throw await failure(response);
    // The staging folder is new and only this restore writes in it; O_NOFOLLOW all the same.
    const handle = await fs.open(
      destination,
      constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW,
      0o666,
    );
    try {
      const hash = new BoundaryHash(Math.floor(file.size / BLOCK_BYTES) * BLOCK_BYTES);
      let size = 0;
      for await (const bytes of response.body) {
        hash.update(bytes);
        size += bytes.length;
        await handle.write(bytes);
      }
      await handle.sync();
      const sha256 = hash.digest();
      if (size !== file.size || sha256 !== file.sha256) {
        throw new Error(`${file.path}: the bytes received do not match the manifest (size or SHA-256)`);
      }
      return {
        generation: file.generation,
        blocks: Math.floor(file.size / BLOCK_BYTES),
        prefixSha256: hash.prefixDigest(),
      };
    } catch (error) {
      // A cut connection surfaces here; a damaged archive is a 500 answered before any byte.
      lastError = error;
    } finally {
      await handle.close();
    }
  }
  throw lastError;
}
