import { IntegrityError } from '../protocol/errors';
import { deflate, inflate } from './compression';
import type { TypedBytes } from './records';

/**
 * Pending writes of one checkpoint: the outputs its tasks produced before the next checkpoint.
 * They are kept in one key per checkpoint, appended with the store's atomic append: one line (see
 * encodeWritesLine) per `putWrites` call, so parallel calls lose nothing and never interleave. Readers merge the
 * lines in the order they were appended, by LangGraph's rule (as its in-memory saver does):
 * - a write is identified by (task id, index);
 * - a regular write (index ≥ 0) already stored is kept: a retry, or a second writer of the same
 *   index, changes nothing;
 * - a special write (negative index: error -1, scheduled -2, interrupt -3, resume -4 in LangGraph)
 *   replaces the one stored under the same (task id, index), so a resume can replace an interrupt.
 * The merged writes are ordered by (task path, task id, index), strings by code point and the
 * index by number: the order in which live execution applies one step's writes.
 */

export interface PendingWrite extends TypedBytes {
  readonly taskId: string;
  readonly taskPath: string;
  readonly channel: string;
  readonly idx: number;
}

interface StoredLine {
  readonly taskId: string;
  readonly taskPath: string;
  readonly runId?: string;
  readonly writes: readonly { channel: string; idx: number; type: string; data: string }[];
}

/** The first byte of a compressed line (a line of JSON starts with `{`). */
const COMPRESSED_LINE = 0x01;
/** Marker, 4 bytes of length, the deflated bytes, a line break. */
const FRAME_HEAD = 5;

interface CompressedHeader {
  readonly taskId: string;
  readonly taskPath: string;
  readonly runId?: string;
  /** Each write without its bytes: those follow the header, in order, `length` each. */
  readonly writes: readonly { channel: string; idx: number; type: string; length: number }[];
}

/**
 * One appended line: the writes of one call, with their task. Stored compressed (see
 * compression.ts): the byte {@link COMPRESSED_LINE}, the length of what follows (4 bytes, big
 * endian), deflated: the line's JSON with each write's length instead of its bytes, a line break,
 * the writes' bytes one after another; then a line break. Lines stored before lines were
 * compressed are JSON with each write's bytes in base64, and a line break; both read (see
 * mergeWrites). The deflated bytes may hold line breaks: sealed, the space seals the line in parts
 * at each of them and joins them again exactly (see SealedThreadSpace), and readers find a
 * compressed line's end by its length, never by a line break.
 */
export function encodeWritesLine(
  taskId: string,
  taskPath: string,
  writes: readonly { channel: string; idx: number; value: TypedBytes }[],
  runId?: string,
): Buffer {
  const header: CompressedHeader = {
    taskId,
    taskPath,
    ...(runId === undefined ? {} : { runId }),
    writes: writes.map((write) => ({
      channel: write.channel,
      idx: write.idx,
      type: write.value.type,
      length: write.value.data.length,
    })),
  };
  const deflated = deflate(
    Buffer.concat([Buffer.from(`${JSON.stringify(header)}\n`), ...writes.map((write) => write.value.data)]),
  );
  const head = Buffer.alloc(FRAME_HEAD);
  head[0] = COMPRESSED_LINE;
  head.writeUInt32BE(deflated.length, 1);
  return Buffer.concat([head, deflated, NEWLINE]);
}

const NEWLINE = Buffer.from('\n');

interface ReadLine {
  readonly taskId: string;
  readonly taskPath: string;
  readonly writes: readonly { channel: string; idx: number; type: string; data: Buffer }[];
}

/** The lines stored in `bytes`, in the order they were appended, each as plain or compressed. */
function readLines(bytes: Buffer, what: string): ReadLine[] {
  const lines: ReadLine[] = [];
  const damaged = () => new IntegrityError(`the pending writes of ${what} hold a damaged line`);
  for (let start = 0; start < bytes.length;) {
    if (bytes[start] === 0x0a) {
      start += 1;
      continue;
    }
    if (bytes[start] === COMPRESSED_LINE) {
      if (start + FRAME_HEAD > bytes.length) throw damaged();
      const length = bytes.readUInt32BE(start + 1);
      const end = start + FRAME_HEAD + length;
      if (end >= bytes.length || bytes[end] !== 0x0a) throw damaged();
      const inner = inflate(bytes.subarray(start + FRAME_HEAD, end), `the pending writes of ${what}`);
      start = end + 1;
      const split = inner.indexOf(0x0a);
      let header: CompressedHeader;
      try {
        header = JSON.parse(
          inner.subarray(0, split < 0 ? inner.length : split).toString('utf8'),
        ) as CompressedHeader;
      } catch {
        throw new IntegrityError(`the pending writes of ${what} hold a line that is not JSON`);
      }
      if (split < 0 || !Array.isArray(header.writes)) throw damaged();
      let offset = split + 1;
      const writes = (header.writes as unknown[]).map((entry) => {
        const write = entry as CompressedHeader['writes'][number];
        if (!Number.isSafeInteger(write.length) || write.length < 0 || offset + write.length > inner.length) {
          throw damaged();
        }
        const data = inner.subarray(offset, offset + write.length);
        offset += write.length;
        return { channel: write.channel, idx: write.idx, type: write.type, data };
      });
      if (offset !== inner.length) throw damaged();
      lines.push({ taskId: header.taskId, taskPath: header.taskPath, writes });
      continue;
    }
    const stop = bytes.indexOf(0x0a, start);
    const end = stop < 0 ? bytes.length : stop;
    let line: StoredLine;
    try {
      line = JSON.parse(bytes.subarray(start, end).toString('utf8')) as StoredLine;
    } catch {
      // No cause: a parser's message quotes the stored bytes, which must never reach a log.
      throw new IntegrityError(`the pending writes of ${what} hold a line that is not JSON`);
    }
    start = end + 1;
    lines.push({
      taskId: line.taskId,
      taskPath: line.taskPath,
      writes: line.writes.map((write) => ({ ...write, data: Buffer.from(write.data, 'base64') })),
    });
  }
  return lines;
}

/**
 * The merged writes stored in `bytes` (see the module comment), in the order each (task id, index)
 * was first stored; {@link canonicalOrder} sorts them for a reader.
 */
export function mergeWrites(bytes: Buffer | null, what: string): PendingWrite[] {
  if (bytes === null || bytes.length === 0) return [];
  const merged = new Map<string, PendingWrite>();
  for (const line of readLines(bytes, what)) {
    for (const write of line.writes) {
      const key = `${line.taskId}\u0000${write.idx}`;
      if (write.idx >= 0 && merged.has(key)) continue;
      merged.set(key, {
        taskId: line.taskId,
        taskPath: line.taskPath,
        channel: write.channel,
        idx: write.idx,
        type: write.type,
        data: write.data,
      });
    }
  }
  return [...merged.values()];
}

/** `writes` sorted by (task path, task id, index). */
export function canonicalOrder(writes: readonly PendingWrite[]): PendingWrite[] {
  return [...writes].sort(compareWrites);
}

export function compareWrites(a: PendingWrite, b: PendingWrite): number {
  return (
    compareByCodePoint(a.taskPath, b.taskPath) || compareByCodePoint(a.taskId, b.taskId) || a.idx - b.idx
  );
}

/**
 * Compares strings by Unicode code point (an astral character sorts after every BMP character),
 * which is not JavaScript's `<` (UTF-16 code units). Unpaired surrogates count as their own values.
 */
export function compareByCodePoint(a: string, b: string): number {
  let i = 0;
  let j = 0;
  while (i < a.length && j < b.length) {
    const x = a.codePointAt(i) ?? 0;
    const y = b.codePointAt(j) ?? 0;
    if (x !== y) return x < y ? -1 : 1;
    i += x > 0xffff ? 2 : 1;
    j += y > 0xffff ? 2 : 1;
  }
  if (i >= a.length && j >= b.length) return 0;
  return i >= a.length ? -1 : 1;
}
