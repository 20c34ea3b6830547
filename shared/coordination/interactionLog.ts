import { randomUUID } from 'node:crypto';

import { InvalidArgumentError } from '../protocol/errors';
import type { KeyValueStore } from '../storage/keyValueStore';
import { decodeUtf8, parseJson } from './conditionalWrite';
import { formatTimestamp, utcDay } from './timestamps';

/**
 * The interaction log: one JSONL file per UTC day,
 * `interactions/<YYYY-MM-DD>.jsonl`, one line per interaction, in this shape:
 *
 *     {"id":"<uuid4>","ts":"…","channel":"teams","direction":"inbound","sender":"…","summary":"…",
 *      "recipient":"…","action":"…","content_ref":"…","metadata":{…}}
 *
 * (optional fields only when given). The day is chosen from the write time in UTC, so 23:45 and
 * 00:15 land in different files. Lines are added with the store's atomic append: concurrent writers
 * are all kept, none torn. Reads skip lines that are not JSON objects with an `id` and a `ts`.
 */

export type Direction = 'inbound' | 'outbound';

export interface NewInteraction {
  readonly channel: string;
  readonly direction: Direction;
  readonly sender: string;
  readonly summary: string;
  readonly recipient?: string;
  readonly action?: string;
  readonly contentRef?: string;
  readonly metadata?: Record<string, unknown>;
}

/** A stored entry: the interaction with its id and time (`direction` as stored, unchecked on read). */
export interface InteractionEntry extends Omit<NewInteraction, 'direction'> {
  readonly id: string;
  readonly ts: string;
  readonly direction: string;
}

export function interactionLogKey(day: string): string {
  return `interactions/${day}.jsonl`;
}

/**
 * Appends one entry to the log of `now`'s UTC day and returns it. Blank channel or summary, or a
 * direction other than inbound/outbound: InvalidArgumentError (nothing written). Storage failures
 * throw.
 */
export async function logInteraction(
  store: KeyValueStore,
  input: NewInteraction,
  now: Date = new Date(),
): Promise<InteractionEntry> {
  if (input.channel.trim() === '') throw new InvalidArgumentError('channel', 'must not be blank');
  if (input.direction !== 'inbound' && input.direction !== 'outbound') {
    throw new InvalidArgumentError('direction', 'must be "inbound" or "outbound"');
  }
  const summary = input.summary.trim();
  if (summary === '') throw new InvalidArgumentError('summary', 'must not be blank');
  const entry: InteractionEntry = {
    id: randomUUID(),
    ts: formatTimestamp(now),
    channel: input.channel,
    direction: input.direction,
    sender: input.sender,
    summary,
    ...(input.recipient === undefined ? {} : { recipient: input.recipient }),
    ...(input.action === undefined ? {} : { action: input.action }),
    ...(input.contentRef === undefined ? {} : { contentRef: input.contentRef }),
    ...(input.metadata === undefined ? {} : { metadata: input.metadata }),
  };
  const line = JSON.stringify({
    id: entry.id,
    ts: entry.ts,
    channel: entry.channel,
    direction: entry.direction,
    sender: entry.sender,
    summary: entry.summary,
    ...(entry.recipient === undefined ? {} : { recipient: entry.recipient }),
    ...(entry.action === undefined ? {} : { action: entry.action }),
    ...(entry.contentRef === undefined ? {} : { content_ref: entry.contentRef }),
    ...(entry.metadata === undefined ? {} : { metadata: entry.metadata }),
  });
  await store.append(interactionLogKey(utcDay(now)), Buffer.from(line + '\n'));
  return entry;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

const optionalString = (value: unknown) => (typeof value === 'string' ? value : undefined);

/** Turns a stored line into an entry, or null for a corrupt line. */
function entryOf(line: string): InteractionEntry | null {
  const value = parseJson(line);
  if (!isRecord(value) || typeof value['id'] !== 'string' || typeof value['ts'] !== 'string') return null;
  const recipient = optionalString(value['recipient']);
  const action = optionalString(value['action']);
  const contentRef = optionalString(value['content_ref']);
  const metadata = value['metadata'];
  return {
    id: value['id'],
    ts: value['ts'],
    channel: optionalString(value['channel']) ?? '',
    direction: optionalString(value['direction']) ?? '',
    sender: optionalString(value['sender']) ?? '',
    summary: optionalString(value['summary']) ?? '',
    ...(recipient === undefined ? {} : { recipient }),
    ...(action === undefined ? {} : { action }),
    ...(contentRef === undefined ? {} : { contentRef }),
    ...(isRecord(metadata) ? { metadata } : {}),
  };
}

/** The entries of one UTC day (`YYYY-MM-DD`, validated by the caller) in file order; [] when none. */
export async function readInteractionDay(store: KeyValueStore, day: string): Promise<InteractionEntry[]> {
  const stored = await store.read(interactionLogKey(day));
  if (stored === null) return [];
  const text = decodeUtf8(stored.value) ?? stored.value.toString('utf8');
  return text
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map(entryOf)
    .filter((entry): entry is InteractionEntry => entry !== null);
}
