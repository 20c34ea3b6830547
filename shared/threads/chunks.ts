import { createHash, createHmac } from 'node:crypto';

/**
 * Values stored by what they add (docs/threads.md, "Storage layout and cost"): a changed channel
 * value is cut into chunks, the chunks its parent's value already has are named again, and only
 * the others are stored, in the pack of the put's own checkpoint record (the part of the record
 * after its JSON and its inline values). The record names the value as a list of segments: runs of
 * bytes in the packs of the records that stored them.
 *
 * - Chunks are cut where a gear rolling hash (FastCDC's, normalised) hits a boundary pattern:
 *   about 4 KiB, 1-16 KiB. A value is first matched against its parent's chunks at the same
 *   offsets (so an append finds every chunk before the changed tail without cutting again); from
 *   the first chunk that differs the rest is cut afresh and each chunk looked up by name among the
 *   parent's (so an edit in the middle costs about the edited chunks). The last chunk of a cut
 *   keeps its final bytes as a chunk of their own (at most 64): an append, which changes only the
 *   end of a serialised list, then stores those and what it adds, not a whole chunk.
 * - Names are keyed digests (HMAC-SHA-256 under the thread's chunk key, kept in the thread record),
 *   never a plain digest of the bytes.
 * - Segments are tiered, as in a log-structured merge: new bytes are tier 0; once the value ends in
 *   {@link FANOUT} segments of one tier, those are written again as one segment of the next tier.
 *   A value changed n times by appends so spans at most (FANOUT - 1) per tier, about
 *   (FANOUT - 1) * (log_FANOUT(n) + 1) segments, each byte is written about log_FANOUT(n) + 1
 *   times, and a value never spans more than {@link MAX_SEGMENTS} (past that it is written whole).
 *   Near the record limit, where a merge would not fit the put's record, the merges that fit are
 *   made (see planValue), and the cap holds.
 */

/** A run of a value's bytes: the checkpoint whose pack holds it, where, and its tier. */
export type Segment = readonly [producer: string, offset: number, length: number, tier: number];
/** A chunk of a value, in order: its name and length (the head keeps these, see HeadEntry). */
export type ChunkRef = readonly [name: string, length: number];

/** Values whose stored bytes (type tag included) are shorter stay whole, inline in the record. */
export const CHUNKED_FROM_BYTES = 1024;
export const MIN_CHUNK = 1024;
export const AVERAGE_CHUNK = 4096;
export const MAX_CHUNK = 16 * 1024;
/** The final bytes of a cut kept as a chunk of their own (see the module comment). */
export const TAIL_CHUNK = 64;
export const FANOUT = 8;
export const MAX_SEGMENTS = 48;

/** 256 fixed pseudo-random 32-bit words (from SHA-256 of their index): the gear table. */
const GEAR = (() => {
  const table = new Uint32Array(256);
  for (let i = 0; i < 256; i++) {
    table[i] = createHash('sha256').update(`cairn gear ${i}`).digest().readUInt32BE(0);
  }
  return table;
})();

// The high bits of the hash depend on the last 32 bytes (it shifts left by one a byte). Before the
// average size a boundary needs 13 high zero bits (rarer), after it 11 (likelier): FastCDC's
// normalised chunking, which narrows the spread of sizes around the average.
const STRICT_MASK = 0xfff80000;
const LOOSE_MASK = 0xffe00000;

export interface ChunkLimits {
  readonly min: number;
  readonly average: number;
  readonly max: number;
}

export const DEFAULT_LIMITS: ChunkLimits = { min: MIN_CHUNK, average: AVERAGE_CHUNK, max: MAX_CHUNK };

/** The end of the chunk that starts at `start` (content-defined; at most `limits.max` long). */
export function chunkEnd(bytes: Uint8Array, start: number, limits: ChunkLimits = DEFAULT_LIMITS): number {
  const remaining = bytes.length - start;
  if (remaining <= limits.min) return bytes.length;
  const end = start + Math.min(remaining, limits.max);
  const normal = start + Math.min(remaining, limits.average);
  let hash = 0;
  let i = start + limits.min;
  for (; i < normal; i++) {
    hash = ((hash << 1) + (GEAR[bytes[i] as number] as number)) >>> 0;
    if ((hash & STRICT_MASK) === 0) return i + 1;
  }
  for (; i < end; i++) {
    hash = ((hash << 1) + (GEAR[bytes[i] as number] as number)) >>> 0;
    if ((hash & LOOSE_MASK) === 0) return i + 1;
  }
  return end;
}

/**
 * Cuts `bytes[from, to)` into chunks: [start, end) pairs. When `to` is the end of the value, the
 * last chunk's final {@link TAIL_CHUNK} bytes are a chunk of their own (if it is longer than twice that).
 */
export function cut(
  bytes: Uint8Array,
  from: number,
  to: number = bytes.length,
  limits: ChunkLimits = DEFAULT_LIMITS,
): [number, number][] {
  const view = to === bytes.length ? bytes : bytes.subarray(0, to);
  const chunks: [number, number][] = [];
  for (let start = from; start < to;) {
    const end = chunkEnd(view, start, limits);
    chunks.push([start, end]);
    start = end;
  }
  const last = chunks.at(-1);
  if (last !== undefined && to === bytes.length && last[1] - last[0] > 2 * TAIL_CHUNK) {
    chunks.pop();
    chunks.push([last[0], last[1] - TAIL_CHUNK], [last[1] - TAIL_CHUNK, last[1]]);
  }
  return chunks;
}

/** A chunk's name: the first 16 bytes of its HMAC-SHA-256 under the thread's chunk key. */
export function chunkName(key: Buffer, bytes: Uint8Array): string {
  return createHmac('sha256', key).update('c').update(bytes).digest().subarray(0, 16).toString('base64url');
}

/** A whole value's keyed digest (its source names it: retries compare values by it). */
export function valueDigest(key: Buffer, bytes: Uint8Array): string {
  return createHmac('sha256', key).update('v').update(bytes).digest().subarray(0, 16).toString('base64url');
}

/** The bytes a put adds to its pack, in order; offsets are handed out as they are added. */
export class PackBuilder {
  private readonly parts: Buffer[] = [];
  size = 0;

  add(bytes: Buffer): number {
    const offset = this.size;
    this.parts.push(bytes);
    this.size += bytes.length;
    return offset;
  }

  bytes(): Buffer {
    return Buffer.concat(this.parts);
  }
}

/** What a put knows of its parent's value of a channel: its segments and the head's chunk list. */
export interface ParentValue {
  readonly segments: readonly Segment[];
  readonly chunks: readonly ChunkRef[];
}

export interface PlannedValue {
  readonly segments: Segment[];
  readonly chunks: ChunkRef[];
}

interface Piece {
  readonly name: string;
  readonly start: number;
  readonly length: number;
  /** Where it is stored, or null for a new piece (added to this put's pack). */
  readonly at: { readonly producer: string; readonly offset: number } | null;
  readonly tier: number;
}

/** The parent's chunks with where each is stored; null when the list does not fit the segments. */
function located(parent: ParentValue): Omit<Piece, 'start'>[] | null {
  const pieces: Omit<Piece, 'start'>[] = [];
  let index = 0;
  let within = 0;
  for (const [name, length] of parent.chunks) {
    const segment = parent.segments[index];
    if (segment === undefined || within + length > segment[2]) return null;
    pieces.push({
      name,
      length,
      at: { producer: segment[0], offset: segment[1] + within },
      tier: segment[3],
    });
    within += length;
    if (within === segment[2]) {
      index += 1;
      within = 0;
    }
  }
  return index === parent.segments.length ? pieces : null;
}

/** Runs of pieces that are one segment: stored together, contiguous, of one tier. */
function runs(pieces: readonly Piece[]): Piece[][] {
  const out: Piece[][] = [];
  for (const piece of pieces) {
    const run = out.at(-1);
    const last = run?.at(-1);
    const joins =
      run !== undefined &&
      last !== undefined &&
      last.tier === piece.tier &&
      (last.at === null
        ? piece.at === null
        : piece.at !== null &&
          piece.at.producer === last.at.producer &&
          piece.at.offset === last.at.offset + last.length);
    if (joins) run.push(piece);
    else out.push([piece]);
  }
  return out;
}

/**
 * How a put stores a value: which chunks it names again from its parent, which it adds to its
 * pack (`pack`, the put's checkpoint `producer`), and the segments and chunk list that name it.
 * `maxPack` bounds the pack (its bytes so far, those this value adds): a merge that would pass it
 * merges only the last {@link FANOUT} segments of its tier, or is not made, and a value that would
 * then span more than {@link MAX_SEGMENTS} is written whole if that fits, else the plan is null
 * (the value must be stored whole, apart from the chunks). `compact` false skips the merges and
 * the cap (to measure a record without them).
 */
export function planValue(
  value: Buffer,
  key: Buffer,
  parent: ParentValue | undefined,
  producer: string,
  pack: PackBuilder,
  options: {
    readonly compact?: boolean;
    readonly maxPack?: number;
    readonly limits?: ChunkLimits;
    readonly fanout?: number;
  } = {},
): PlannedValue | null {
  const limits = options.limits ?? DEFAULT_LIMITS;
  const fanout = options.fanout ?? FANOUT;
  const maxPack = options.maxPack ?? Infinity;
  const known = parent === undefined ? [] : (located(parent) ?? []);
  const pieces: Piece[] = [];
  let position = 0;
  // The parent's chunks at the same offsets, while they match.
  for (const chunk of known) {
    const end = position + chunk.length;
    if (end > value.length || chunkName(key, value.subarray(position, end)) !== chunk.name) break;
    pieces.push({ ...chunk, start: position });
    position = end;
  }
  const byName = new Map(known.map((chunk) => [chunk.name, chunk]));
  const fresh = (from: number, to: number, tier: number): Piece[] =>
    cut(value, from, to, limits).map(([start, end]) => ({
      name: chunkName(key, value.subarray(start, end)),
      start,
      length: end - start,
      at: null,
      tier,
    }));
  for (const piece of fresh(position, value.length, 0)) {
    const found = byName.get(piece.name);
    pieces.push(
      found !== undefined && found.length === piece.length ? { ...found, start: piece.start } : piece,
    );
  }
  let segments = runs(pieces);
  // A value stored afresh as one run goes in at the tier its size would have reached.
  if (segments.length === 1 && segments[0]?.[0]?.at === null) {
    const tier = tierOfSize(value.length);
    segments = [fresh(0, value.length, tier)];
  }
  if (options.compact !== false) {
    // The bytes the pack holds once the segments before `first` stay and the rest is written again.
    const packed = (first: number) =>
      pack.size +
      segments
        .slice(0, first)
        .flat()
        .reduce((sum, piece) => (piece.at === null ? sum + piece.length : sum), 0) +
      value.length -
      (segments[first]?.[0]?.start ?? value.length);
    for (;;) {
      const tier = segments.at(-1)?.[0]?.tier ?? 0;
      let first = segments.length;
      while (first > 0 && segments[first - 1]?.[0]?.tier === tier) first -= 1;
      if (segments.length - first < fanout) break;
      if (packed(first) > maxPack) first = segments.length - fanout;
      if (packed(first) > maxPack) break;
      const from = segments[first]?.[0]?.start ?? 0;
      segments = [...segments.slice(0, first), fresh(from, value.length, tier + 1)];
    }
    if (segments.length > MAX_SEGMENTS) {
      if (packed(0) > maxPack) return null;
      const top = Math.max(...segments.map((run) => run[0]?.tier ?? 0));
      segments = [fresh(0, value.length, top + 1)];
    }
  }
  const placed: Piece[] = segments.flat().map((piece) =>
    piece.at !== null
      ? piece
      : {
          ...piece,
          at: { producer, offset: pack.add(value.subarray(piece.start, piece.start + piece.length)) },
        },
  );
  return {
    segments: runs(placed).map((run) => {
      const first = run[0] as Piece;
      const at = first.at as NonNullable<Piece['at']>;
      return [at.producer, at.offset, run.reduce((sum, piece) => sum + piece.length, 0), first.tier];
    }),
    chunks: placed.map((piece) => [piece.name, piece.length]),
  };
}

/** The tier a run of `length` bytes would reach by merges of appends of about a chunk. */
function tierOfSize(length: number): number {
  let tier = 0;
  for (let size = AVERAGE_CHUNK * FANOUT; size <= length; size *= FANOUT) tier += 1;
  return tier;
}

/** The bytes of a value from its segments, given each producer's pack. */
export function assemble(
  segments: readonly Segment[],
  packOf: (producer: string) => Buffer,
  what: string,
): Buffer {
  const parts = segments.map(([producer, offset, length]) => {
    const pack = packOf(producer);
    if (!Number.isSafeInteger(offset) || offset < 0 || offset + length > pack.length) {
      throw new RangeError(`${what}: a segment lies outside the pack of checkpoint ${producer}`);
    }
    return pack.subarray(offset, offset + length);
  });
  return Buffer.concat(parts);
}

/** Whether `value` is a list of segments as a record stores them. */
export function isSegments(value: unknown): value is Segment[] {
  return (
    Array.isArray(value) &&
    value.every(
      (segment) =>
        Array.isArray(segment) &&
        segment.length === 4 &&
        typeof segment[0] === 'string' &&
        Number.isSafeInteger(segment[1]) &&
        Number.isSafeInteger(segment[2]) &&
        Number.isSafeInteger(segment[3]),
    )
  );
}
