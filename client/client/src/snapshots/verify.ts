import { createHash } from 'node:crypto';

import { forEachLimited } from '@cairn-state/protocol/pool';
import { partCount, partName, partSize } from '@cairn-state/protocol/snapshots/identifiers';
import type { SnapshotFile } from '@cairn-state/protocol/snapshots/manifest';

import { fetchVerifiedManifest, type ManifestCheckOptions } from './load.js';
import type { SnapshotRoutes } from './routes.js';

/**
 * Checks a stored snapshot with nothing but its id, the public key and read access: the manifest's
 * SHA-256 and signature, its version and paths (as a load does), then that every part of every
 * file is stored with the right size, or, with `readData`, reads every part and checks each file's
 * SHA-256. Problems with parts are collected (all of them, not just the first); a bad manifest
 * throws at once.
 */

export interface VerifyOptions extends ManifestCheckOptions {
  readonly readData?: boolean;
  /** Files checked at once (default 16). */
  readonly concurrency?: number;
}

export interface VerifyReport {
  readonly id: string;
  readonly workspaceId: string;
  readonly files: number;
  readonly symlinks: number;
  readonly parts: number;
  readonly bytes: number;
  readonly dataRead: boolean;
  /** Empty when the snapshot is whole. */
  readonly problems: string[];
}

const DEFAULT_CONCURRENCY = 16;

export async function verifySnapshot(
  api: SnapshotRoutes,
  id: string,
  options: VerifyOptions,
): Promise<VerifyReport> {
  const { manifest } = await fetchVerifiedManifest(api, id, options);
  // Each content once, named by its first file.
  const contents = new Map<string, SnapshotFile>();
  for (const file of manifest.files) if (!contents.has(file.sha256)) contents.set(file.sha256, file);
  const problems: string[] = [];
  let parts = 0;
  await forEachLimited([...contents.values()], options.concurrency ?? DEFAULT_CONCURRENCY, async (file) => {
    const hash = createHash('sha256');
    for (let part = 0; part < partCount(file.size); part++) {
      parts++;
      const expected = partSize(file.size, part);
      const where = `${file.path}: part ${partName(file.sha256, part)}`;
      if (options.readData === true) {
        const bytes = await api.getPart(manifest.workspaceId, file.sha256, part);
        if (bytes === null || bytes.length !== expected) {
          problems.push(
            `${where} ${bytes === null ? 'is not stored' : `has ${bytes.length} bytes, not ${expected}`}`,
          );
          return;
        }
        hash.update(bytes);
      } else {
        const size = await api.headPart(manifest.workspaceId, file.sha256, part);
        if (size !== expected) {
          problems.push(`${where} ${size === null ? 'is not stored' : `has ${size} bytes, not ${expected}`}`);
        }
      }
    }
    if (options.readData === true && hash.digest('hex') !== file.sha256) {
      problems.push(`${file.path}: its bytes do not match the manifest's SHA-256`);
    }
  });
  problems.sort();
  return {
    id,
    workspaceId: manifest.workspaceId,
    files: manifest.files.length,
    symlinks: manifest.symlinks.length,
    parts,
    bytes: manifest.files.reduce((sum, file) => sum + file.size, 0),
    dataRead: options.readData === true,
    problems,
  };
}
