import type { PendingEvent } from '../audit/pending';
import { IntegrityError } from '../protocol/errors';
import { type ChunkRef, isSegments, type Segment } from './chunks';
import { deflate, inflate } from './compression';

/**
 * What the thread store keeps, as JSON, and how it is shown to callers.
 *
 * The thread record (`t/<threadId>`) is the one mutable record of a thread: every change to it is a
 * compare-and-swap on its ETag. It holds the head of each namespace inline (the whole checkpoint
 * record), so reading the latest checkpoint needs no second record; the live run with its lease and
 * fencing token; and the last runs that ended. Everything else of a thread is immutable and lives
 * under `d/<threadId>/<incarnation>/`, where the incarnation is made when the thread is created:
 * a thread deleted and created again under the same name never sees the old data.
 */

export type ChannelVersion = number | string;

/** Bytes the client serialised, opaque to Cairn, with its serializer's type tag (e.g. `json`). */
export interface TypedBytes {
  readonly type: string;
  readonly data: Buffer;
}

/** A checkpoint as stored (immutable, `d/.../c/<inverted id>/<namespace>`) and held inline as a head. */
export interface CheckpointRecord {
  readonly id: string;
  readonly ns: string;
  readonly parent: string | null;
  readonly createdAt: string;
  /** The client's checkpoint format version (LangGraph's `v`); below 4, reads add pending sends. */
  readonly v: number;
  /** The client's serialised checkpoint without channel values: type tag and base64. */
  readonly type: string;
  readonly checkpoint: string;
  readonly metadata: Record<string, unknown>;
  readonly channelVersions: Record<string, ChannelVersion>;
  /**
   * Each channel that has a value at this checkpoint, mapped to the checkpoint that stored that
   * value (this one when the channel changed here, else the parent's source): unchanged channels
   * are stored once, and a value is found by its producer, never by its version alone (a fork
   * reuses version numbers for other values).
   */
  readonly valueSources: Record<string, string>;
  /** The run that stored it, when one did. */
  readonly runId?: string;
  /**
   * The values this checkpoint stored in its own record (channel → the stored bytes: type tag, a
   * line break, the bytes), named by sources whose digest starts with `~` (see isInlineSource).
   * Only in the stored record: a head held in the thread record goes without (see withoutInline).
   */
  readonly inline?: Readonly<Record<string, Buffer>>;
  /**
   * Channel → its value as segments of packs (see chunks.ts), for every channel whose value is
   * stored by what it adds (its source's digest starts with `*`, see isChunkedSource), changed here
   * or inherited (copied from the parent, so that a record reads its values by itself).
   */
  readonly pieces?: Readonly<Record<string, readonly Segment[]>>;
  /**
   * The record's pack: the chunks this checkpoint added, which segments of it and of later
   * checkpoints name by offset. Only in the stored record, after the inline values (see
   * withoutInline); once retention removed the record, at the pack key of its checkpoint.
   */
  readonly pack?: Buffer;
}

/**
 * Whether a value source names a value held in its producer's record (`<id>/~<digest>`) rather
 * than a value object of its own (`<id>/<digest>`). Such a value, once retention removed that
 * record, is at the value key of its source, where retention put it first.
 */
export function isInlineSource(source: string): boolean {
  return source.charCodeAt(source.lastIndexOf('/') + 1) === 0x7e;
}

/**
 * Whether a value source names a value stored by what it adds (`<id>/*<keyed digest>`): read from
 * the record's `pieces`, never from a value key of its own.
 */
export function isChunkedSource(source: string): boolean {
  return source.charCodeAt(source.lastIndexOf('/') + 1) === 0x2a;
}

/** The checkpoint that stored the value a source names. */
export function producerOf(source: string): string {
  return source.slice(0, source.lastIndexOf('/'));
}

/** The record as a head is held in the thread record: without the values it holds inline, nor its pack. */
export function withoutInline(record: CheckpointRecord): CheckpointRecord {
  if (record.inline === undefined && record.pack === undefined) return record;
  const rest: { -readonly [K in keyof CheckpointRecord]: CheckpointRecord[K] } = { ...record };
  delete rest.inline;
  delete rest.pack;
  return rest;
}

/** Every checkpoint whose pack a record's segments name. */
export function producersNamed(record: CheckpointRecord): Set<string> {
  const producers = new Set<string>();
  for (const segments of Object.values(record.pieces ?? {})) {
    for (const [producer] of segments) producers.add(producer);
  }
  return producers;
}

export interface HeadEntry {
  readonly record: CheckpointRecord;
  /**
   * Channel → the chunks of its value in order (name, length), for the channels the record has
   * pieces of: the next put of the namespace finds the chunks it can name again without a read.
   */
  readonly chunks?: Readonly<Record<string, readonly ChunkRef[]>>;
  /** When this checkpoint became the head (a put or a rewind). */
  readonly since: string;
  /** Set by a rewind: the head is not the namespace's newest checkpoint. */
  readonly rewound?: boolean;
}

export type EndedStatus = 'finished' | 'failed' | 'interrupted' | 'expired';
export type RunStatus = 'running' | EndedStatus;

export interface LiveRun {
  readonly runId: string;
  readonly fencingToken: number;
  readonly startedAt: string;
  /** The serving instance's clock decides whether this has passed (see ThreadStore). */
  readonly leaseExpiresAt: string;
  /** The lease a heartbeat renews when it names no other. */
  readonly leaseMs: number;
}

export interface EndedRun {
  readonly runId: string;
  readonly fencingToken: number;
  readonly startedAt: string;
  readonly endedAt: string;
  readonly status: EndedStatus;
}

export interface ThreadRecord {
  readonly v: 1;
  readonly threadId: string;
  readonly incarnation: string;
  readonly createdAt: string;
  readonly updatedAt: string;
  /** Namespace → head. A Map: namespaces are caller text (`__proto__` included). */
  readonly heads: ReadonlyMap<string, HeadEntry>;
  /** The last fencing token handed out; every run start increments it. */
  readonly fence: number;
  /** The run that holds or last held the thread, until another starts; its lease may have expired. */
  readonly run: LiveRun | null;
  /** Runs that ended, newest first, at most {@link MAX_RECENT_RUNS}. */
  readonly recentRuns: readonly EndedRun[];
  /**
   * The audit events of the changes this record committed (run start and finish, rewind) that are
   * not known to be in the audit trail yet: written in the same compare-and-swap as the change, so
   * that a repair can tell the change committed (see shared/audit/pending.ts). Dropped once known
   * appended. Absent when empty.
   */
  readonly outbox?: readonly PendingEvent[];
  /**
   * The key (32 random bytes, base64) under which the thread's chunks are named (see chunks.ts):
   * made with the thread, sealed with its record when values are sealed. A thread stored before
   * values were stored by what they add gets one at its next put, whose values go whole.
   */
  readonly chunkKey?: string;
}

export { MAX_RECENT_RUNS } from '../protocol/threads';

/** `obj[key]` when `key` is an own property (so `constructor` or `__proto__` never reach a prototype). */
export function ownValue<T>(obj: Readonly<Record<string, T>>, key: string): T | undefined {
  return Object.hasOwn(obj, key) ? obj[key] : undefined;
}

/** Sets an own property, also for `__proto__` (plain assignment would change the prototype). */
export function setOwn<T>(obj: Record<string, T>, key: string, value: T): void {
  Object.defineProperty(obj, key, { value, enumerable: true, writable: true, configurable: true });
}

interface StoredThreadRecord extends Omit<ThreadRecord, 'heads'> {
  readonly heads: { readonly ns: string; readonly head: HeadEntry }[];
}

export function encodeThreadRecord(record: ThreadRecord): Buffer {
  const stored: StoredThreadRecord = {
    ...record,
    heads: [...record.heads].map(([ns, head]) => ({ ns, head })),
  };
  return Buffer.from(JSON.stringify(stored));
}

export function decodeThreadRecord(bytes: Buffer, threadId: string): ThreadRecord {
  let stored: StoredThreadRecord;
  try {
    stored = JSON.parse(bytes.toString('utf8')) as StoredThreadRecord;
  } catch {
    // No cause: a parser's message quotes the stored bytes, which must never reach a log.
    throw new IntegrityError(`the record of thread ${threadId} is not JSON`);
  }
  if (stored.v !== 1 || !Array.isArray(stored.heads)) {
    throw new IntegrityError(`the record of thread ${threadId} has an unknown format`);
  }
  return { ...stored, heads: new Map(stored.heads.map(({ ns, head }) => [ns, head])) };
}

/** The first byte of a checkpoint record stored compressed (a record of JSON starts with `{`). */
const COMPRESSED_RECORD = 0x01;

const encodings = new WeakMap<CheckpointRecord, Buffer>();

/**
 * A checkpoint record as stored. Compressed (the current format, see compression.ts): the byte
 * {@link COMPRESSED_RECORD}, then, deflated, its JSON without the serialised checkpoint (naming the
 * checkpoint's length as `body`, each inline channel and its length, in order, as `inlined`, and
 * the pack's length as `packed`), a line break, the checkpoint's bytes, the inline values' bytes
 * one after another and the pack. Stored plain, as every record was before records were
 * compressed, and still when compression would not make it smaller: its JSON (with the checkpoint
 * in base64), then, with values inline or a pack, a line break and the same bytes after it. JSON
 * never holds a raw line break, so the first one ends it; a record without one is JSON alone (as
 * every record was before values went inline). Readers take all three.
 */
export function encodeCheckpointRecord(record: CheckpointRecord): Buffer {
  const known = encodings.get(record);
  if (known !== undefined) return known;
  const plain = plainRecord(record);
  const inline = Object.entries(record.inline ?? {});
  const pack = record.pack ?? Buffer.alloc(0);
  const body = Buffer.from(record.checkpoint, 'base64');
  const rest: { -readonly [K in keyof CheckpointRecord]?: CheckpointRecord[K] } = {
    ...withoutInline(record),
  };
  delete rest.checkpoint;
  const header = {
    ...rest,
    body: body.length,
    inlined: inline.map(([channel, bytes]) => [channel, bytes.length]),
    ...(pack.length === 0 ? {} : { packed: pack.length }),
  };
  const deflated = deflate(
    Buffer.concat([
      Buffer.from(`${JSON.stringify(header)}\n`),
      body,
      ...inline.map(([, bytes]) => bytes),
      pack,
    ]),
  );
  const encoded =
    deflated.length + 1 < plain.length ? Buffer.concat([Buffer.of(COMPRESSED_RECORD), deflated]) : plain;
  encodings.set(record, encoded);
  return encoded;
}

/** The record stored plain (see encodeCheckpointRecord). */
function plainRecord(record: CheckpointRecord): Buffer {
  const inline = Object.entries(record.inline ?? {});
  const pack = record.pack ?? Buffer.alloc(0);
  if (inline.length === 0 && pack.length === 0) return Buffer.from(JSON.stringify(withoutInline(record)));
  const header = {
    ...withoutInline(record),
    inlined: inline.map(([channel, bytes]) => [channel, bytes.length]),
    ...(pack.length === 0 ? {} : { packed: pack.length }),
  };
  return Buffer.concat([
    Buffer.from(`${JSON.stringify(header)}\n`),
    ...inline.map(([, bytes]) => bytes),
    pack,
  ]);
}

export function decodeCheckpointRecord(stored: Buffer, checkpointId: string): CheckpointRecord {
  const compressed = stored[0] === COMPRESSED_RECORD;
  const bytes = compressed ? inflate(stored.subarray(1), `the record of checkpoint ${checkpointId}`) : stored;
  const end = bytes.indexOf(0x0a);
  let parsed: CheckpointRecord & { inlined?: unknown; packed?: unknown; body?: unknown };
  try {
    parsed = JSON.parse(bytes.subarray(0, end < 0 ? bytes.length : end).toString('utf8')) as typeof parsed;
  } catch {
    // No cause: a parser's message quotes the stored bytes, which must never reach a log.
    throw new IntegrityError(`the record of checkpoint ${checkpointId} is not JSON`);
  }
  if (parsed.pieces !== undefined && !Object.values(parsed.pieces).every(isSegments)) {
    throw new IntegrityError(`the record of checkpoint ${checkpointId} has damaged pieces`);
  }
  if (end < 0 && !compressed) return parsed;
  const { inlined, packed, body, ...rest } = parsed;
  const record: { -readonly [K in keyof CheckpointRecord]: CheckpointRecord[K] } = rest;
  let offset = end + 1;
  if (compressed) {
    if (end < 0 || typeof body !== 'number' || !Number.isSafeInteger(body) || offset + body > bytes.length) {
      throw new IntegrityError(`the record of checkpoint ${checkpointId} has a damaged checkpoint`);
    }
    record.checkpoint = bytes.subarray(offset, offset + body).toString('base64');
    offset += body;
  }
  const inline: Record<string, Buffer> = {};
  for (const entry of Array.isArray(inlined) ? (inlined as unknown[]) : []) {
    const [channel, length] = Array.isArray(entry) ? (entry as unknown[]) : [];
    if (
      typeof channel !== 'string' ||
      typeof length !== 'number' ||
      !Number.isSafeInteger(length) ||
      length < 0 ||
      offset + length > bytes.length
    ) {
      throw new IntegrityError(`the record of checkpoint ${checkpointId} has damaged inline values`);
    }
    setOwn(inline, channel, bytes.subarray(offset, offset + length));
    offset += length;
  }
  const packLength = packed === undefined ? 0 : packed;
  if (typeof packLength !== 'number' || offset + packLength !== bytes.length || !Array.isArray(inlined)) {
    throw new IntegrityError(`the record of checkpoint ${checkpointId} has damaged inline values`);
  }
  // As read from a record stored plain: `inline` (maybe empty) whenever it has bytes after its JSON.
  const plainJson = compressed && (inlined as unknown[]).length === 0 && packLength === 0;
  const withValues = plainJson ? record : { ...record, inline };
  return packLength === 0 ? withValues : { ...withValues, pack: bytes.subarray(offset, offset + packLength) };
}

/**
 * Two puts of one checkpoint id agree when everything the client sent is the same (`createdAt`,
 * `runId` and the computed sources aside): a retry.
 */
export function sameCheckpoint(a: CheckpointRecord, b: CheckpointRecord): boolean {
  const sent = (record: CheckpointRecord) =>
    JSON.stringify([
      record.id,
      record.ns,
      record.parent,
      record.v,
      record.type,
      record.checkpoint,
      record.metadata,
      record.channelVersions,
    ]);
  return sent(a) === sent(b);
}

/** A stored value: its type tag, a line break, then its bytes (the tag has no line break). */
export function encodeValue(value: TypedBytes): Buffer {
  return Buffer.concat([Buffer.from(`${value.type}\n`), value.data]);
}

export function decodeValue(bytes: Buffer, what: string): TypedBytes {
  const end = bytes.indexOf(0x0a);
  if (end < 1) throw new IntegrityError(`the stored value of ${what} has no type tag`);
  return { type: bytes.subarray(0, end).toString('utf8'), data: bytes.subarray(end + 1) };
}

// Views: what the HTTP API answers.

export interface RunView {
  readonly runId: string;
  readonly threadId: string;
  readonly status: RunStatus;
  readonly fencingToken: number;
  readonly startedAt: string;
  readonly leaseExpiresAt?: string;
  readonly endedAt?: string;
}

export interface HeadView {
  readonly checkpointId: string;
  readonly parent: string | null;
  readonly createdAt: string;
  readonly since: string;
}

export interface ThreadView {
  readonly threadId: string;
  readonly createdAt: string;
  readonly updatedAt: string;
  /** Namespace → head, for the namespaces whose head the thread record holds. */
  readonly heads: Record<string, HeadView>;
  readonly run: RunView | null;
  readonly recentRuns: RunView[];
}

export function liveRunView(threadId: string, run: LiveRun, now: number): RunView {
  return {
    runId: run.runId,
    threadId,
    status: Date.parse(run.leaseExpiresAt) > now ? 'running' : 'expired',
    fencingToken: run.fencingToken,
    startedAt: run.startedAt,
    leaseExpiresAt: run.leaseExpiresAt,
  };
}

export function endedRunView(threadId: string, run: EndedRun): RunView {
  return {
    runId: run.runId,
    threadId,
    status: run.status,
    fencingToken: run.fencingToken,
    startedAt: run.startedAt,
    endedAt: run.endedAt,
  };
}

export function threadView(record: ThreadRecord, now: number): ThreadView {
  const heads: Record<string, HeadView> = {};
  for (const [ns, head] of record.heads) {
    setOwn(heads, ns, {
      checkpointId: head.record.id,
      parent: head.record.parent,
      createdAt: head.record.createdAt,
      since: head.since,
    });
  }
  return {
    threadId: record.threadId,
    createdAt: record.createdAt,
    updatedAt: record.updatedAt,
    heads,
    run: record.run === null ? null : liveRunView(record.threadId, record.run, now),
    recentRuns: record.recentRuns.map((run) => endedRunView(record.threadId, run)),
  };
}
