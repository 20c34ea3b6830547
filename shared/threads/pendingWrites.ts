import { IntegrityError } from '../protocol/errors';
import type { TypedBytes } from './records';

/**
 * Pending writes of one checkpoint: the outputs its tasks produced before the next checkpoint.
 * They are kept in one key per checkpoint, appended with the store's atomic append: one JSON line
 * per `putWrites` call, so parallel calls lose nothing and never interleave. Readers merge the
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

/** One appended line: the writes of one call, with their task. */
export function encodeWritesLine(
  taskId: string,
  taskPath: string,
  writes: readonly { channel: string; idx: number; value: TypedBytes }[],
  runId?: string,
): Buffer {
  const line: StoredLine = {
    taskId,
    taskPath,
    ...(runId === undefined ? {} : { runId }),
    writes: writes.map((write) => ({
      channel: write.channel,
      idx: write.idx,
      type: write.value.type,
      data: write.value.data.toString('base64'),
    })),
  };
  return Buffer.from(JSON.stringify(line) + '\n');
}

/**
 * The merged writes stored in `bytes` (see the module comment), in the order each (task id, index)
 * was first stored; {@link canonicalOrder} sorts them for a reader.
 */
export function mergeWrites(bytes: Buffer | null, what: string): PendingWrite[] {
  if (bytes === null || bytes.length === 0) return [];
  const merged = new Map<string, PendingWrite>();
  for (const text of bytes.toString('utf8').split('\n')) {
    if (text === '') continue;
    let line: StoredLine;
    try {
      line = JSON.parse(text) as StoredLine;
    } catch {
      // No cause: a parser's message quotes the stored bytes, which must never reach a log.
      throw new IntegrityError(`the pending writes of ${what} hold a line that is not JSON`);
    }
    for (const write of line.writes) {
      const key = `${line.taskId}\u0000${write.idx}`;
      if (write.idx >= 0 && merged.has(key)) continue;
      merged.set(key, {
        taskId: line.taskId,
        taskPath: line.taskPath,
        channel: write.channel,
        idx: write.idx,
        type: write.type,
        data: Buffer.from(write.data, 'base64'),
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
