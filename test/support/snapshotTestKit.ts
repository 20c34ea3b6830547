import { createHash, generateKeyPairSync, type KeyObject, sign } from 'node:crypto';

import { PART_BYTES, partCount, partSize } from '../../shared/protocol/snapshots/identifiers';
import {
  MANIFEST_VERSION,
  serializeManifest,
  type SnapshotFile,
  type SnapshotSymlink,
} from '../../shared/protocol/snapshots/manifest';

/** Test support for snapshots: key pairs, manifests built from in-memory files, their parts. */

export interface KeyPair {
  readonly privateKey: KeyObject;
  readonly publicKey: KeyObject;
}

export function newKeyPair(): KeyPair {
  return generateKeyPairSync('ed25519');
}

/** Base64 of the raw 32 bytes of an Ed25519 public key (the CAIRN_SNAPSHOT_KEYS form). */
export function rawBase64(publicKey: KeyObject): string {
  return Buffer.from(publicKey.export({ format: 'jwk' }).x ?? '', 'base64url').toString('base64');
}

export const sha256 = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');

export interface MemoryFile {
  readonly path: string;
  readonly bytes: Buffer;
  readonly mode?: number;
}

export interface BuiltSnapshot {
  readonly id: string;
  readonly manifest: Buffer;
  readonly signature: Buffer;
  readonly files: SnapshotFile[];
  /** Every part of every file: [sha256, part, bytes]. */
  readonly parts: [string, number, Buffer][];
}

/** A signed snapshot of in-memory files (canonical manifest, its id, the parts to upload). */
export function buildSnapshot(
  workspaceId: string,
  files: readonly MemoryFile[],
  key: KeyObject,
  options: { symlinks?: SnapshotSymlink[]; createdAt?: string } = {},
): BuiltSnapshot {
  const entries = files.map((file) => ({
    path: file.path,
    sha256: sha256(file.bytes),
    size: file.bytes.length,
    mode: file.mode ?? 0o644,
  }));
  const manifest = serializeManifest({
    version: MANIFEST_VERSION,
    workspaceId,
    createdAt: options.createdAt ?? new Date().toISOString(),
    files: entries,
    symlinks: options.symlinks ?? [],
  });
  return {
    id: sha256(manifest),
    manifest,
    signature: sign(null, manifest, key),
    files: entries,
    parts: partsOf(files),
  };
}

export function partsOf(files: readonly MemoryFile[]): [string, number, Buffer][] {
  const parts = new Map<string, [string, number, Buffer]>();
  for (const file of files) {
    const hash = sha256(file.bytes);
    for (let part = 0; part < partCount(file.bytes.length); part++) {
      const start = part * PART_BYTES;
      parts.set(`${hash}/${part}`, [
        hash,
        part,
        file.bytes.subarray(start, start + partSize(file.bytes.length, part)),
      ]);
    }
  }
  return [...parts.values()];
}

/** Manifest bytes as given (not canonicalised), signed: for manifests the serializer would never make. */
export function signedRaw(text: string, key: KeyObject): { manifest: Buffer; signature: Buffer; id: string } {
  const manifest = Buffer.from(text, 'utf8');
  return { manifest, signature: sign(null, manifest, key), id: sha256(manifest) };
}
