import { createHash } from 'node:crypto';
import { crc32 } from 'node:zlib';

import type { DecodedFact, FactColumns } from './factColumns';
import { LITTLE_ENDIAN } from './vectors';

/**
 * A stored copy of what the search cache holds of one subtree of a tenant (docs/memory.md,
 * "Search cache", "Snapshots"): the columns a search ranks over, in one object, stamped with the
 * change-feed position they reflect and when the subtree was read. A fresh instance reads it in
 * one request instead of every row, then catches up from the stamped position through the feed as
 * a warm cache does, so what a search sees is still decided by the feed, never by the snapshot.
 * It is a cache: deleting one is always safe (the next search reads the rows).
 *
 * Layout (the plaintext, sealed by the codec as a whole, bound to tenant and subtree):
 * `CMSNAP1\n`, a u32 (little-endian) CRC-32 of everything after it (a damaged snapshot is never
 * used), a u32 byte length and the header (JSON: format, tenant, digest,
 * position, scannedAt and one entry per fact: id, namespace, key, etag, createdAt, updatedAt,
 * expiresAt or null, the stored value's byte count, the JSON text's byte count and the vectors
 * as `[path, dims]`; and per dimension count the number of vectors), then every fact's JSON text
 * (UTF-8) in the header's order, then per dimension count every vector of that count, float32
 * little-endian, in the facts' order: one contiguous block each, copied into the vector block's
 * segments when read.
 */

/** The largest snapshot written or read (bytes of the stored object). */
export const MAX_SNAPSHOT_BYTES = 64 * 1024 * 1024;

const MAGIC = Buffer.from('CMSNAP1\n', 'latin1');
const FORMAT = 1;

/** Where a tenant's snapshots are stored: one object per subtree digest, overwritten in place. */
export interface MemorySnapshotStore {
  /** The snapshot of the subtree, or null when there is none or it is larger than `maxBytes`. */
  read(tenant: string, digest: string, maxBytes: number): Promise<Buffer | null>;
  /** Stores (or replaces) the snapshot of the subtree whole: a reader never sees part of it. */
  write(tenant: string, digest: string, bytes: Buffer): Promise<void>;
  /** Deletes the snapshot of the subtree (nothing when absent). */
  delete(tenant: string, digest: string): Promise<void>;
  /** The subtrees of the tenant that have a snapshot, with when each was stored. */
  list(tenant: string): Promise<{ digest: string; storedAt: Date }[]>;
}

/** The folder (or name prefix) of a tenant's snapshots: 32 hex digits of its SHA-256. */
export function snapshotTenantDir(tenant: string): string {
  return createHash('sha256').update(tenant, 'utf8').digest('hex').slice(0, 32);
}

/** The object name of a subtree's snapshot within its tenant's folder (`root` for the tenant). */
export function snapshotName(digest: string): string {
  return digest === '' ? 'root' : digest;
}

/** The digest of a snapshot's object name; null when the name is not one. */
export function digestOfSnapshotName(name: string): string | null {
  if (name === 'root') return '';
  return /^(?:[0-9a-f]{20})+$/.test(name) ? name : null;
}

type Row = [
  id: string,
  namespace: string,
  key: string,
  etag: string,
  createdAt: number,
  updatedAt: number,
  expiresAt: number | null,
  bytes: number,
  jsonBytes: number,
  vectors: [path: string, dims: number][],
];

interface Header {
  readonly format: number;
  readonly tenant: string;
  readonly digest: string;
  readonly position: string;
  readonly scannedAt: number;
  readonly rows: Row[];
  /** Per dimension count, in the order the body holds them: how many vectors. */
  readonly blocks: [dims: number, rows: number][];
}

/**
 * The plaintext snapshot of the slots `slots` of `columns`, or null when it would be larger than
 * {@link MAX_SNAPSHOT_BYTES} (or a fact's vectors cannot be told apart by path). Allocated once,
 * at its final size.
 */
export function encodeSnapshot(
  columns: FactColumns,
  slots: readonly number[],
  stamp: { tenant: string; digest: string; position: string; scannedAt: number },
): Buffer | null {
  const rows: Row[] = [];
  /** Per dimension count, the vectors in the facts' order. */
  const blocks = new Map<number, Float32Array[]>();
  let bodyBytes = 0;
  for (const slot of slots) {
    const jsonBytes = Buffer.byteLength(columns.json[slot] as string, 'utf8');
    const vectors = columns.vectorsOf(slot);
    if (vectors === null) return null;
    bodyBytes += jsonBytes;
    for (const { floats } of vectors) {
      bodyBytes += floats.byteLength;
      const block = blocks.get(floats.length);
      if (block === undefined) blocks.set(floats.length, [floats]);
      else block.push(floats);
    }
    if (bodyBytes > MAX_SNAPSHOT_BYTES) return null;
    const expiresAt = columns.expiresAt[slot] as number;
    rows.push([
      columns.ids[slot] as string,
      columns.namespaces[slot] as string,
      columns.keys[slot] as string,
      columns.etags[slot] as string,
      columns.createdAt[slot] as number,
      columns.updatedAt[slot] as number,
      expiresAt === Infinity ? null : expiresAt,
      columns.bytes[slot] as number,
      jsonBytes,
      vectors.map((vector) => [vector.path, vector.floats.length]),
    ]);
  }
  let header = JSON.stringify({
    format: FORMAT,
    ...stamp,
    rows,
    blocks: [...blocks].map(([dims, vectors]) => [dims, vectors.length]),
  } satisfies Header);
  const start = MAGIC.length + 8;
  // Padded with spaces so that the blocks start at a multiple of 4 (floats aligned where they lie).
  const unaligned = (start + Buffer.byteLength(header, 'utf8') + bodyBytes) % 4;
  if (unaligned !== 0) header += ' '.repeat(4 - unaligned);
  const headerBytes = Buffer.byteLength(header, 'utf8');
  const total = start + headerBytes + bodyBytes;
  if (total > MAX_SNAPSHOT_BYTES) return null;
  const plain = Buffer.allocUnsafe(total);
  MAGIC.copy(plain, 0);
  plain.writeUInt32LE(headerBytes, MAGIC.length + 4);
  let at = start + plain.write(header, start, 'utf8');
  for (const slot of slots) at += plain.write(columns.json[slot] as string, at, 'utf8');
  for (const vectors of blocks.values()) {
    for (const floats of vectors) {
      if (LITTLE_ENDIAN) plain.set(new Uint8Array(floats.buffer, floats.byteOffset, floats.byteLength), at);
      else for (let i = 0; i < floats.length; i++) plain.writeFloatLE(floats[i] as number, at + i * 4);
      at += floats.byteLength;
    }
  }
  plain.writeUInt32LE(crc32(plain.subarray(MAGIC.length + 4)), MAGIC.length);
  return plain;
}

/**
 * The stamp, facts and vector blocks of a plaintext snapshot (what `FactColumns.restore` takes);
 * throws when it is damaged, of another format, or not the snapshot of this tenant's subtree (the
 * caller reads the rows instead).
 */
export function decodeSnapshot(
  plain: Buffer,
  expected: { tenant: string; digest: string },
): {
  position: string;
  scannedAt: number;
  facts: DecodedFact[];
  blocks: Map<number, { bytes: Buffer; rows: number }>;
} {
  const damaged = () => new Error('a damaged memory snapshot');
  if (plain.length < MAGIC.length + 8 || !plain.subarray(0, MAGIC.length).equals(MAGIC)) {
    throw new Error('not a memory snapshot');
  }
  if (crc32(plain.subarray(MAGIC.length + 4)) !== plain.readUInt32LE(MAGIC.length)) throw damaged();
  const headerLength = plain.readUInt32LE(MAGIC.length + 4);
  let at = MAGIC.length + 8 + headerLength;
  if (at > plain.length) throw damaged();
  const header = JSON.parse(plain.toString('utf8', MAGIC.length + 8, at)) as Header;
  if (header.format !== FORMAT || header.tenant !== expected.tenant || header.digest !== expected.digest) {
    throw new Error('the snapshot of another subtree');
  }
  if (
    typeof header.position !== 'string' ||
    !Number.isFinite(header.scannedAt) ||
    !Array.isArray(header.rows) ||
    !Array.isArray(header.blocks)
  ) {
    throw damaged();
  }
  const counted = new Map<number, number>();
  const facts: DecodedFact[] = [];
  for (const row of header.rows) {
    const [id, namespace, key, etag, createdAt, updatedAt, expiresAt, bytes, jsonBytes, vectors] = row;
    if (typeof id !== 'string' || !id.startsWith(expected.digest) || !Array.isArray(vectors)) throw damaged();
    if (!Number.isSafeInteger(jsonBytes) || jsonBytes < 0 || at + jsonBytes > plain.length) throw damaged();
    const json = plain.toString('utf8', at, at + jsonBytes);
    at += jsonBytes;
    for (const [, dims] of vectors) counted.set(dims, (counted.get(dims) ?? 0) + 1);
    facts.push({
      id,
      namespace,
      key,
      etag,
      createdAt,
      updatedAt,
      expiresAt,
      bytes,
      json,
      vectors: vectors.map(([path, dims]) => ({ path, dims })),
    });
  }
  const blocks = new Map<number, { bytes: Buffer; rows: number }>();
  for (const [dims, rows] of header.blocks) {
    if (!Number.isSafeInteger(dims) || dims < 1 || counted.get(dims) !== rows || blocks.has(dims))
      throw damaged();
    const length = dims * rows * 4;
    if (at + length > plain.length) throw damaged();
    blocks.set(dims, { bytes: plain.subarray(at, at + length), rows });
    at += length;
  }
  if (at !== plain.length || blocks.size !== counted.size) throw damaged();
  return { position: header.position, scannedAt: header.scannedAt, facts, blocks };
}
