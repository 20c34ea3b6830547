import { randomUUID } from 'node:crypto';

import { z } from 'zod';

import {
  ConflictError,
  InvalidArgumentError,
  NotFoundError,
  PreconditionFailedError,
} from '../protocol/errors';
import type { KeyValueStore, StoredValue } from '../storage/keyValueStore';
import { decodeUtf8, parseJson } from './conditionalWrite';
import { formatTimestamp, rfc3339Millis } from './timestamps';

/**
 * Promises an agent made in a chat, one tenant-wide JSONL file,
 * `promises.jsonl`. Each line is one version of a promise, in this shape:
 *
 *     {"id":"<uuid4 hex>","created_at":"…","chat_id":"…","description":"…","due_by":"…","status":"open"}
 *     {"id":"<same>","created_at":"…","chat_id":"…","description":"…","status":"resolved","resolved_at":"…","resolution":"…"}
 *
 * Absent optional fields are left out. Reads skip blank, corrupt and id-less lines and fold by id,
 * the last line winning. Every change rewrites the file with If-Match on the version it read
 * (create-only when the file is absent, so two first promises never overwrite each other), retried
 * once on conflict, then {@link ConflictError} (409). When a write leaves
 * {@link COMPACT_AT_ENTRIES} entries or more, the file is rewritten with one line per promise, keeping
 * every open promise and those resolved within {@link RESOLVED_RETENTION_MS}.
 */

export const PROMISES_KEY = 'promises.jsonl';
export const COMPACT_AT_ENTRIES = 1000;
export const RESOLVED_RETENTION_MS = 30 * 24 * 60 * 60 * 1000;
const WRITE_ATTEMPTS = 2;

export type PromiseStatus = 'open' | 'resolved';

export interface PromiseRecord {
  readonly id: string;
  readonly createdAt: string;
  readonly chatId: string;
  readonly description: string;
  readonly dueBy: string | null;
  readonly status: PromiseStatus;
  readonly resolvedAt?: string;
  readonly resolution?: string;
}

export interface NewPromise {
  readonly chatId: string;
  readonly description: string;
  readonly dueBy?: string | null;
}

const lineSchema = z.object({
  id: z.string().min(1),
  created_at: z.string(),
  chat_id: z.string(),
  description: z.string(),
  due_by: z.string().nullable().optional(),
  status: z.enum(['open', 'resolved']),
  resolved_at: z.string().nullable().optional(),
  resolution: z.string().nullable().optional(),
});

function fromLine(line: z.infer<typeof lineSchema>): PromiseRecord {
  const resolvedAt = line.status === 'resolved' ? (line.resolved_at ?? undefined) : undefined;
  const resolution = line.status === 'resolved' ? (line.resolution ?? undefined) : undefined;
  return {
    id: line.id,
    createdAt: line.created_at,
    chatId: line.chat_id,
    description: line.description,
    dueBy: line.due_by ?? null,
    status: line.status,
    ...(resolvedAt === undefined ? {} : { resolvedAt }),
    ...(resolution === undefined ? {} : { resolution }),
  };
}

function toLine(record: PromiseRecord): string {
  return JSON.stringify({
    id: record.id,
    created_at: record.createdAt,
    chat_id: record.chatId,
    description: record.description,
    ...(record.dueBy === null ? {} : { due_by: record.dueBy }),
    status: record.status,
    ...(record.resolvedAt === undefined ? {} : { resolved_at: record.resolvedAt }),
    ...(record.resolution === undefined ? {} : { resolution: record.resolution }),
  });
}

interface PromiseFile {
  /** Null when the file is absent. */
  readonly etag: string | null;
  readonly text: string;
  /** Valid entries (lines), in file order. */
  readonly entries: number;
  /** Folded by id, first appearance order, last version winning. */
  readonly promises: Map<string, PromiseRecord>;
}

function parsePromiseFile(stored: StoredValue | null): PromiseFile {
  if (stored === null) return { etag: null, text: '', entries: 0, promises: new Map() };
  // Bytes that are not UTF-8 are read leniently: the lines that still parse are kept.
  const text = decodeUtf8(stored.value) ?? stored.value.toString('utf8');
  const promises = new Map<string, PromiseRecord>();
  let entries = 0;
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    const parsed = lineSchema.safeParse(parseJson(line));
    if (!parsed.success) continue;
    entries++;
    promises.set(parsed.data.id, fromLine(parsed.data));
  }
  return { etag: stored.etag, text, entries, promises };
}

async function readPromiseFile(store: KeyValueStore): Promise<PromiseFile> {
  return parsePromiseFile(await store.read(PROMISES_KEY));
}

/** The promises, open only or all, in creation order. Storage failures throw (503). */
export async function listPromises(store: KeyValueStore, status: 'open' | 'all'): Promise<PromiseRecord[]> {
  const file = await readPromiseFile(store);
  const all = [...file.promises.values()];
  return status === 'all' ? all : all.filter((promise) => promise.status === 'open');
}

/** The file with `records` appended, compacted when it reaches {@link COMPACT_AT_ENTRIES} entries. */
function withAppended(file: PromiseFile, records: readonly PromiseRecord[], now: Date): string {
  if (file.entries + records.length >= COMPACT_AT_ENTRIES) {
    const folded = new Map(file.promises);
    for (const record of records) folded.set(record.id, record);
    return compacted([...folded.values()], now);
  }
  const separator = file.text === '' || file.text.endsWith('\n') ? '' : '\n';
  return file.text + separator + records.map((record) => toLine(record) + '\n').join('');
}

/**
 * One line per promise: every open one, and the resolved ones resolved (or, lacking that, created)
 * within {@link RESOLVED_RETENTION_MS} of `now`; resolved ones with an unparseable date are dropped.
 */
export function compacted(promises: readonly PromiseRecord[], now: Date): string {
  const cutoff = now.getTime() - RESOLVED_RETENTION_MS;
  return promises
    .filter((promise) => {
      if (promise.status === 'open') return true;
      const when = rfc3339Millis(promise.resolvedAt ?? promise.createdAt);
      return when !== null && when >= cutoff;
    })
    .map((promise) => toLine(promise) + '\n')
    .join('');
}

/**
 * Reads, lets `change` decide, and writes what it returns with If-Match (create-only when absent):
 * the shape above, retried once on a conflict, then ConflictError. `change` returns no `text` to
 * write nothing. Storage failures throw.
 */
async function changePromises<T>(
  store: KeyValueStore,
  change: (file: PromiseFile) => { text: string; result: T } | { result: T; text?: undefined },
): Promise<T> {
  for (let attempt = 0; attempt < WRITE_ATTEMPTS; attempt++) {
    const file = await readPromiseFile(store);
    const decided = change(file);
    if (decided.text === undefined) return decided.result;
    try {
      await store.write(
        PROMISES_KEY,
        Buffer.from(decided.text),
        file.etag === null ? { ifAbsent: true } : { ifMatch: file.etag },
      );
      return decided.result;
    } catch (error) {
      // Another writer got in between our read and our write: read again (once).
      if (!(error instanceof PreconditionFailedError)) throw error;
    }
  }
  throw new ConflictError('the promise store kept changing during the write; retry');
}

function requireText(field: string, value: string): string {
  const trimmed = value.trim();
  if (trimmed === '') throw new InvalidArgumentError(field, 'must not be blank');
  return trimmed;
}

/** Records a new open promise and returns it. Blank chatId or description: InvalidArgumentError. */
export async function addPromise(
  store: KeyValueStore,
  input: NewPromise,
  now: Date = new Date(),
): Promise<PromiseRecord> {
  if (input.chatId.trim() === '') throw new InvalidArgumentError('chatId', 'must not be blank');
  const record: PromiseRecord = {
    id: randomUUID().replaceAll('-', ''),
    createdAt: formatTimestamp(now),
    chatId: input.chatId,
    description: requireText('description', input.description),
    dueBy: input.dueBy ?? null,
    status: 'open',
  };
  return changePromises(store, (file) => ({ text: withAppended(file, [record], now), result: record }));
}

/**
 * Resolves promise `id` and returns it. Idempotent: a promise already resolved is returned as stored
 * and nothing is written. Unknown id: NotFoundError (404).
 */
export async function resolvePromise(
  store: KeyValueStore,
  id: string,
  resolution: string,
  now: Date = new Date(),
): Promise<PromiseRecord> {
  const text = requireText('resolution', resolution);
  return changePromises(store, (file) => {
    const current = file.promises.get(id);
    if (current === undefined) throw new NotFoundError('no promise has this id');
    if (current.status === 'resolved') return { result: current };
    const resolved: PromiseRecord = {
      ...current,
      status: 'resolved',
      resolvedAt: formatTimestamp(now),
      resolution: text,
    };
    return { text: withAppended(file, [resolved], now), result: resolved };
  });
}
