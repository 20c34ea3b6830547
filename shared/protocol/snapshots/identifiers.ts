import { InvalidArgumentError } from '../errors.js';
import { PART_BYTES } from '../snapshots.js';

/**
 * Names inside a tenant's snapshot storage (docs/snapshots.md), validated before any I/O:
 *
 * - `workspaces/<workspaceId>/latest`: the pointer to the workspace's latest snapshot;
 * - `workspaces/<workspaceId>/snapshots/<snapshotId>/manifest.json` and `…/manifest.sig`: the exact
 *   manifest bytes and their Ed25519 signature (64 raw bytes);
 * - `objects/<sha256 of a file>/<part>`: the file's bytes `[part·2 MiB, (part+1)·2 MiB)`, shared by
 *   every workspace of the tenant (an empty file has no part);
 * - `ids/<snapshotId>`: the workspace a snapshot id belongs to, so that a snapshot can be found by
 *   its id alone.
 */

/** The bytes of every part but a file's last; the last holds 1 to this many. */
export { PART_BYTES };
/** `latest` names the latest snapshot in routes; it can never be a snapshot id (64 hex digits). */
export const LATEST = 'latest';

const WORKSPACE_ID = /^[A-Za-z0-9._-]{1,128}$/;
export const WORKSPACE_ID_RULE = 'must be 1-128 characters of [A-Za-z0-9._-], not "." or ".."';
const SHA256 = /^[0-9a-f]{64}$/;
export const SHA256_RULE = 'must be 64 lowercase hex digits (a SHA-256)';
const PART = /^(0|[1-9][0-9]{0,9})$/;

export function isValidWorkspaceId(value: string): boolean {
  return WORKSPACE_ID.test(value) && value !== '.' && value !== '..';
}

export function validateWorkspaceId(value: string, field = 'workspaceId'): void {
  if (!isValidWorkspaceId(value)) throw new InvalidArgumentError(field, WORKSPACE_ID_RULE);
}

export function isSha256(value: string): boolean {
  return SHA256.test(value);
}

/** A snapshot id is the SHA-256 of the exact manifest bytes, in lowercase hex. */
export function validateSnapshotId(value: string, field = 'snapshotId'): void {
  if (!SHA256.test(value)) {
    throw new InvalidArgumentError(
      field,
      'must be a snapshot id: 64 lowercase hex digits (the SHA-256 of its manifest)',
    );
  }
}

export function validateSha256(value: string, field = 'sha256'): void {
  if (!SHA256.test(value)) throw new InvalidArgumentError(field, SHA256_RULE);
}

/** A part number: decimal without leading zeros. */
export function parsePart(value: string, field = 'part'): number {
  if (!PART.test(value)) {
    throw new InvalidArgumentError(field, 'must be a part number: decimal, without leading zeros');
  }
  return Number(value);
}

/** How many parts a file of `size` bytes has (0 for an empty file). */
export function partCount(size: number): number {
  return Math.ceil(size / PART_BYTES);
}

/** The size of part `index` of a file of `size` bytes. */
export function partSize(size: number, index: number): number {
  return Math.min(PART_BYTES, size - index * PART_BYTES);
}

/** The name of a part in the API and in `missing` lists: `<sha256>/<part>`. */
export function partName(sha256: string, part: number): string {
  return `${sha256}/${part}`;
}

export const objectKey = (sha256: string, part: number) => `objects/${sha256}/${part}`;
export const objectPrefix = (sha256: string) => `objects/${sha256}/`;
export const latestKey = (workspaceId: string) => `workspaces/${workspaceId}/latest`;
export const snapshotsPrefix = (workspaceId: string) => `workspaces/${workspaceId}/snapshots/`;
export const manifestKey = (workspaceId: string, id: string) =>
  `${snapshotsPrefix(workspaceId)}${id}/manifest.json`;
export const signatureKey = (workspaceId: string, id: string) =>
  `${snapshotsPrefix(workspaceId)}${id}/manifest.sig`;
/** The snapshot that was `latest` when this one was published onto it (empty: none). */
export const parentKey = (workspaceId: string, id: string) => `${snapshotsPrefix(workspaceId)}${id}/parent`;
export const idIndexKey = (id: string) => `ids/${id}`;
export const MANIFEST_FILE = 'manifest.json';
