import { endianness } from 'node:os';

import { InvalidArgumentError } from '../protocol/errors';
import {
  type Distance,
  MAX_FIELD_PATH_BYTES,
  MAX_VECTOR_DIMS,
  MAX_VECTORS_PER_FACT,
} from '../protocol/memory';
import { isPlainText } from './facts';

/**
 * Vectors with facts: a fact may carry one vector per indexed field of its value (the field paths
 * LangGraph indexes: `"$"` for the whole value, `"text"`, `"a.b[*]"`, `"a.b.0"`), computed by the
 * caller (Cairn runs no model). Each vector is 1 to {@link MAX_VECTOR_DIMS} float32 numbers; every
 * vector of a tenant has the same dimension count, fixed by the first vector the tenant stores
 * (its index, see `MemoryStore.readIndex`).
 *
 * Vectors are stored inside the fact's value bytes, so they are sealed with the value when
 * encryption is on, and deleted, expired, pruned, re-sealed and audited with it, with no second
 * place to keep in step. The plaintext of a fact with vectors is
 *
 *     0x00 0x01 | u32 n | n bytes of the value's JSON | u16 count | count × (u16 p | p bytes of the
 *     field path in UTF-8 | u16 d | d × float32)
 *
 * (little-endian). A value's JSON never starts with the byte 0x00, so a fact without vectors is
 * stored exactly as before (its JSON) and older rows read as they are.
 */

/** Field path → vector. */
export type FactVectors = ReadonlyMap<string, Float32Array>;

export const LITTLE_ENDIAN = endianness() === 'LE';

const MAGIC = 0x00;
const VERSION = 0x01;

/** Throws InvalidArgumentError naming `<field>.<path>` unless `input` is an object of vectors. */
export function checkVectors(input: unknown, field = 'vectors'): Map<string, Float32Array> {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) {
    throw new InvalidArgumentError(field, 'must be an object of field path → array of numbers (or base64)');
  }
  const entries = Object.entries(input);
  if (entries.length > MAX_VECTORS_PER_FACT) {
    throw new InvalidArgumentError(field, `must hold at most ${MAX_VECTORS_PER_FACT} vectors`);
  }
  const vectors = new Map<string, Float32Array>();
  for (const [path, vector] of entries) {
    const where = `${field}.${path}`;
    if (path === '' || Buffer.byteLength(path, 'utf8') > MAX_FIELD_PATH_BYTES || !isPlainText(path)) {
      throw new InvalidArgumentError(
        where,
        `must be named by a field path of 1 to ${MAX_FIELD_PATH_BYTES} bytes without control characters`,
      );
    }
    vectors.set(path, checkVector(vector, where));
  }
  return vectors;
}

/**
 * Throws InvalidArgumentError naming `field` unless `input` is 1..4096 finite float32 numbers: a
 * JSON array of numbers, or a string of base64 (standard alphabet, padded) of the float32 numbers
 * little-endian, 4 bytes each (a quarter of the JSON's size on the wire, and no number to parse).
 */
export function checkVector(input: unknown, field = 'vector'): Float32Array {
  if (typeof input === 'string') return vectorOfBase64(input, field);
  if (!Array.isArray(input) || input.length === 0 || input.length > MAX_VECTOR_DIMS) {
    throw new InvalidArgumentError(field, `must be an array of 1 to ${MAX_VECTOR_DIMS} numbers`);
  }
  const vector = new Float32Array(input.length);
  for (let i = 0; i < input.length; i++) {
    const number: unknown = input[i];
    if (typeof number !== 'number' || !Number.isFinite(Math.fround(number))) {
      throw new InvalidArgumentError(field, 'must hold only finite numbers within float32 range');
    }
    vector[i] = number;
  }
  return vector;
}

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

function vectorOfBase64(input: string, field: string): Float32Array {
  const maxChars = 4 * Math.ceil((MAX_VECTOR_DIMS * 4) / 3);
  if (input.length === 0 || input.length > maxChars || !BASE64.test(input)) {
    throw new InvalidArgumentError(
      field,
      `must be an array of 1 to ${MAX_VECTOR_DIMS} numbers or base64 of as many float32 little-endian`,
    );
  }
  const bytes = Buffer.from(input, 'base64');
  if (bytes.length === 0 || bytes.length % 4 !== 0 || bytes.length > MAX_VECTOR_DIMS * 4) {
    throw new InvalidArgumentError(
      field,
      `must be base64 of 1 to ${MAX_VECTOR_DIMS} float32 numbers (a multiple of 4 bytes)`,
    );
  }
  const dims = bytes.length / 4;
  for (let i = 0; i < dims; i++) {
    if (!Number.isFinite(bytes.readFloatLE(i * 4))) {
      throw new InvalidArgumentError(field, 'must hold only finite numbers within float32 range');
    }
  }
  // The decoded bytes are the floats: used where they lie (a view, no second copy) when aligned.
  if (LITTLE_ENDIAN && bytes.byteOffset % 4 === 0)
    return new Float32Array(bytes.buffer, bytes.byteOffset, dims);
  const vector = new Float32Array(dims);
  for (let i = 0; i < dims; i++) vector[i] = bytes.readFloatLE(i * 4);
  return vector;
}

/** The dimension count all `vectors` share, or null when there are none; 400 when they differ. */
export function commonDims(vectors: FactVectors, field = 'vectors'): number | null {
  let dims: number | null = null;
  for (const [path, vector] of vectors) {
    if (dims === null) dims = vector.length;
    else if (vector.length !== dims) {
      throw new InvalidArgumentError(
        `${field}.${path}`,
        `must have ${dims} dimensions, as the other vectors of the fact`,
      );
    }
  }
  return dims;
}

/**
 * The plaintext to seal: the value's JSON alone when there are no vectors. Written into one
 * buffer of its final size (a batch packs hundreds of facts: no part allocated on its own).
 */
export function packFact(json: Buffer, vectors: FactVectors): Buffer {
  if (vectors.size === 0) return json;
  let size = 6 + json.length + 2;
  for (const [path, vector] of vectors) size += 2 + Buffer.byteLength(path, 'utf8') + 2 + vector.length * 4;
  const plain = Buffer.allocUnsafe(size);
  plain[0] = MAGIC;
  plain[1] = VERSION;
  plain.writeUInt32LE(json.length, 2);
  let at = 6 + json.copy(plain, 6);
  at = plain.writeUInt16LE(vectors.size, at);
  for (const [path, vector] of vectors) {
    const name = plain.write(path, at + 2, 'utf8');
    plain.writeUInt16LE(name, at);
    at = plain.writeUInt16LE(vector.length, at + 2 + name);
    if (LITTLE_ENDIAN) plain.set(new Uint8Array(vector.buffer, vector.byteOffset, vector.byteLength), at);
    else for (let i = 0; i < vector.length; i++) plain.writeFloatLE(vector[i] as number, at + i * 4);
    at += vector.length * 4;
  }
  return plain;
}

/** Where one vector lies in a plaintext made by {@link packFact}. */
export interface PackedVector {
  readonly path: string;
  /** Byte offset of its first float32 (little-endian) in the plaintext. */
  readonly at: number;
  readonly dims: number;
}

/**
 * The value's JSON and where each vector lies in a plaintext made by {@link packFact}, without
 * copying a float; null when damaged.
 */
export function packedLayout(plain: Buffer): { json: Buffer; vectors: PackedVector[] } | null {
  if (plain.length === 0 || plain[0] !== MAGIC) return { json: plain, vectors: [] };
  try {
    if (plain[1] !== VERSION) return null;
    const n = plain.readUInt32LE(2);
    let at = 6 + n;
    if (at > plain.length) return null;
    const json = plain.subarray(6, at);
    const count = plain.readUInt16LE(at);
    at += 2;
    const vectors: PackedVector[] = [];
    for (let v = 0; v < count; v++) {
      const p = plain.readUInt16LE(at);
      at += 2;
      const path = plain.toString('utf8', at, at + p);
      at += p;
      const dims = plain.readUInt16LE(at);
      at += 2;
      if (at + dims * 4 > plain.length) return null;
      vectors.push({ path, at, dims });
      at += dims * 4;
    }
    return at === plain.length ? { json, vectors } : null;
  } catch {
    return null;
  }
}

/** Copies `dims` float32 numbers stored little-endian at byte `at` of `plain` into `into` from `offset`. */
export function copyFloats(
  plain: Buffer,
  at: number,
  dims: number,
  into: Float32Array,
  offset: number,
): void {
  if (LITTLE_ENDIAN) {
    new Uint8Array(into.buffer, into.byteOffset + offset * 4, dims * 4).set(
      plain.subarray(at, at + dims * 4),
    );
  } else {
    for (let i = 0; i < dims; i++) into[offset + i] = plain.readFloatLE(at + i * 4);
  }
}

/** The value's JSON and the vectors of a plaintext made by {@link packFact}; null when damaged. */
export function unpackFact(plain: Buffer): { json: Buffer; vectors: Map<string, Float32Array> } | null {
  const layout = packedLayout(plain);
  if (layout === null) return null;
  const vectors = new Map<string, Float32Array>();
  for (const { path, at, dims } of layout.vectors) {
    const vector = new Float32Array(dims);
    copyFloats(plain, at, dims, vector, 0);
    vectors.set(path, vector);
  }
  return { json: layout.json, vectors };
}

/**
 * How close `vector` is to `query` (same length), higher is closer: cosine similarity (0 when
 * either is all zeros), the dot product, or the negated Euclidean distance.
 */
export function closeness(query: Float32Array, vector: Float32Array, distance: Distance): number {
  let dot = 0;
  let qq = 0;
  let vv = 0;
  let squares = 0;
  for (let i = 0; i < query.length; i++) {
    const q = query[i] as number;
    const v = vector[i] as number;
    dot += q * v;
    qq += q * q;
    vv += v * v;
    const d = q - v;
    squares += d * d;
  }
  if (distance === 'dot') return dot;
  if (distance === 'l2') return -Math.sqrt(squares);
  return qq > 0 && vv > 0 ? dot / Math.sqrt(qq * vv) : 0;
}

/**
 * A {@link closeness} as a score in [0, 1], monotone (so ranking by either is the same): cosine
 * `(1 + cos) / 2`; dot product `1 / (1 + e^-dot)` (the logistic function); L2 `1 / (1 + distance)`.
 */
export function vectorScore(closenessValue: number, distance: Distance): number {
  const score =
    distance === 'cosine'
      ? (1 + closenessValue) / 2
      : distance === 'dot'
        ? 1 / (1 + Math.exp(-closenessValue))
        : 1 / (1 - closenessValue);
  return Math.min(1, Math.max(0, score));
}

/** The constant of reciprocal rank fusion: each list adds `1 / (RRF_K + rank)`, rank from 1. */
export const RRF_K = 60;
