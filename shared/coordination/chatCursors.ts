import { z } from 'zod';

import type { KeyValueStore } from '../storage/keyValueStore';
import { encodeChatId } from './chatIds';
import { conditionalWrite, decodeUtf8, parseJson, readOutcome } from './conditionalWrite';
import { formatTimestamp, laterTimestamp, rfc3339Millis } from './timestamps';

/**
 * Per-chat delivery cursors, shared by every instance of a fleet, and
 * `claimDelivery`: the compare-and-swap that hands each new message id to exactly one caller.
 *
 * ## Stored value (`chat_cursors/<percent-encoded chat id>.json`)
 *
 *     {"last_ts":"2026-11-29T21:16:51.123Z","seen_ids_tail":["1764450000000","1764450011000"],
 *      "bootstrapped":true,"last_written_at":"2026-11-29T21:16:52.000Z"}
 *
 * - `seen_ids_tail`: the delivered message ids, at most {@link SEEN_IDS_TAIL_LIMIT}: the largest in
 *   sort order (Teams message ids are millisecond timestamps of equal length, so the newest).
 * - `last_ts`: the newest message time seen; a claim keeps the later of the stored and given value.
 * - `last_written_at`: when a writer last stored the cursor; staleness is judged by it.
 *
 * Every doubt resolves to "deliver nothing": replaying an old message to an agent is a security
 * problem (a replayed instruction is a prompt-injection surface). A cursor that cannot be read or
 * is not understood is `unresolved` and claims nothing; it is never treated as absent and never
 * overwritten by a claim.
 */

export const CLAIM_MAX_ATTEMPTS = 4;
export const SEEN_IDS_TAIL_LIMIT = 50;
/** A cursor not written for longer than this is stale (but still present: never a re-bootstrap). */
export const CURSOR_STALENESS_MS = 24 * 60 * 60 * 1000;

export interface ChatCursor {
  readonly lastTs: string | null;
  readonly seenIdsTail: readonly string[];
  readonly bootstrapped: boolean;
  readonly lastWrittenAt: string | null;
}

/** A cursor version this instance knows (see chatCursorCache.ts: a compare-and-swap hint only). */
export interface CachedChatCursor {
  readonly etag: string;
  readonly cursor: ChatCursor;
}

/** What a claim asks of the cache of cursor versions, seen from one tenant. */
export interface TenantChatCursorCache {
  get(chatId: string): CachedChatCursor | undefined;
  set(chatId: string, entry: CachedChatCursor): void;
  delete(chatId: string): void;
}

export type ChatCursorRead =
  | { readonly outcome: 'present'; readonly cursor: ChatCursor; readonly etag: string }
  | { readonly outcome: 'absent'; readonly cursor: null; readonly etag: null }
  | { readonly outcome: 'unresolved'; readonly cursor: null; readonly etag: null; readonly problem: string };

export type ClaimReason = 'unresolved' | 'contention';

export interface DeliveryClaim {
  /** The candidate ids this caller now owns, in candidate order; deliver exactly these. */
  readonly claimed: string[];
  /** Null when the cursor was read and, if needed, written; otherwise why nothing was claimed. */
  readonly reason: ClaimReason | null;
  /** Conditional writes tried (0 when none was needed). */
  readonly attempts: number;
}

export function chatCursorKey(chatId: string): string {
  return `chat_cursors/${encodeChatId(chatId)}.json`;
}

const storedSchema = z.object({
  last_ts: z.string().nullable().optional(),
  seen_ids_tail: z.array(z.string()),
  bootstrapped: z.boolean().optional(),
  last_written_at: z.string().nullable().optional(),
});

/** The cursor in a stored value, or null when it is not one (not JSON, not an object, bad fields). */
export function parseChatCursor(bytes: Buffer): ChatCursor | null {
  const text = decodeUtf8(bytes);
  const parsed = storedSchema.safeParse(text === null ? undefined : parseJson(text));
  if (!parsed.success) return null;
  return {
    lastTs: parsed.data.last_ts ?? null,
    seenIdsTail: parsed.data.seen_ids_tail,
    bootstrapped: parsed.data.bootstrapped ?? false,
    lastWrittenAt: parsed.data.last_written_at ?? null,
  };
}

export function formatChatCursor(cursor: ChatCursor): Buffer {
  return Buffer.from(
    JSON.stringify({
      last_ts: cursor.lastTs,
      seen_ids_tail: cursor.seenIdsTail,
      bootstrapped: cursor.bootstrapped,
      last_written_at: cursor.lastWrittenAt,
    }) + '\n',
  );
}

/**
 * The three-way read: `present` (a cursor, fresh or stale), `absent` (the read succeeded and found
 * nothing: the only case where a caller may bootstrap), `unresolved` (the read failed, the value is
 * not a cursor, or it came without an ETag). Never throws.
 */
export async function resolveChatCursor(store: KeyValueStore, chatId: string): Promise<ChatCursorRead> {
  const read = await readOutcome(store, chatCursorKey(chatId));
  if (!read.ok) return { outcome: 'unresolved', cursor: null, etag: null, problem: 'the read failed' };
  if (read.stored === null) return { outcome: 'absent', cursor: null, etag: null };
  const cursor = parseChatCursor(read.stored.value);
  if (cursor === null) {
    return { outcome: 'unresolved', cursor: null, etag: null, problem: 'the value is not a chat cursor' };
  }
  if (read.stored.etag === '') {
    return { outcome: 'unresolved', cursor: null, etag: null, problem: 'the value came without an ETag' };
  }
  return { outcome: 'present', cursor, etag: read.stored.etag };
}

/**
 * True when the cursor was last written more than {@link CURSOR_STALENESS_MS} before `now`, or its
 * write time is missing or unparseable. Judged by write time, not message time, so idle chats are
 * not stale just because their last message is old. A stale cursor is still present.
 */
export function isCursorStale(cursor: ChatCursor, now: Date = new Date()): boolean {
  const writtenAt = cursor.lastWrittenAt === null ? null : rfc3339Millis(cursor.lastWrittenAt);
  return writtenAt === null || now.getTime() - writtenAt > CURSOR_STALENESS_MS;
}

/**
 * The candidate ids `cursor` has not delivered, in candidate order, each once. With a full tail, an
 * id that sorts below the smallest id in it is treated as delivered: it may have been in the tail
 * and pushed out, and when in doubt nothing is delivered. (Teams ids grow with time, so such an id
 * is an old message.)
 */
export function undeliveredIds(cursor: ChatCursor | null, candidateIds: readonly string[]): string[] {
  const seen = new Set(cursor?.seenIdsTail ?? []);
  const tail = cursor?.seenIdsTail ?? [];
  const smallest = tail.length >= SEEN_IDS_TAIL_LIMIT ? tail.reduce((a, b) => (b < a ? b : a)) : undefined;
  const result: string[] = [];
  for (const id of candidateIds) {
    if (seen.has(id) || (smallest !== undefined && id < smallest)) continue;
    seen.add(id);
    result.push(id);
  }
  return result;
}

/** The cursor after delivering `candidateIds` (sorted tail of 50, later lastTs, stamped). */
export function mergedChatCursor(
  cursor: ChatCursor | null,
  candidateIds: readonly string[],
  lastTs: string | null,
  now: Date,
): ChatCursor {
  const seen = [...new Set([...(cursor?.seenIdsTail ?? []), ...candidateIds])].sort();
  return {
    lastTs: laterTimestamp(cursor?.lastTs ?? null, lastTs),
    seenIdsTail: seen.slice(-SEEN_IDS_TAIL_LIMIT),
    bootstrapped: true,
    lastWrittenAt: formatTimestamp(now),
  };
}

export interface ClaimDeliveryOptions {
  readonly lastTs?: string | null;
  readonly now?: () => Date;
  /** Versions this instance knows, to skip the read when there is something to write (see the cache). */
  readonly cache?: TenantChatCursorCache;
}

/**
 * Claims the candidate ids of `chatId` that no caller has claimed yet: reads the cursor with its
 * ETag, computes the new ids, and writes the merged cursor with If-Match (create-only when the
 * cursor is absent, so that two first claims never both win). On a lost write it reads again, up
 * to {@link CLAIM_MAX_ATTEMPTS} attempts. Across all concurrent callers each id is claimed at most
 * once (exactly once by whoever wins its write).
 *
 * Claims nothing, with `reason`:
 * - `unresolved`: the cursor cannot be read or is not understood, or a write failed or may have
 *   landed (its ids then count as delivered: they are never handed out twice);
 * - `contention`: every attempt lost its write.
 * Empty candidates, or nothing new: `[]` with reason null and no write. Never throws.
 */
export async function claimDelivery(
  store: KeyValueStore,
  chatId: string,
  candidateIds: readonly string[],
  options: ClaimDeliveryOptions = {},
): Promise<DeliveryClaim> {
  if (candidateIds.length === 0) return { claimed: [], reason: null, attempts: 0 };
  const key = chatCursorKey(chatId);
  const clock = options.now ?? (() => new Date());
  const { cache } = options;
  let useCache = cache !== undefined;
  for (let attempt = 1; attempt <= CLAIM_MAX_ATTEMPTS; attempt++) {
    // The cached version only ever saves the read before a write: "nothing new" is always read.
    const cached = useCache ? cache?.get(chatId) : undefined;
    useCache = false;
    let current: ChatCursorRead;
    let claimed: string[];
    if (cached !== undefined && undeliveredIds(cached.cursor, candidateIds).length > 0) {
      current = { outcome: 'present', ...cached };
      claimed = undeliveredIds(cached.cursor, candidateIds);
    } else {
      current = await resolveChatCursor(store, chatId);
      if (current.outcome === 'unresolved') {
        cache?.delete(chatId);
        return { claimed: [], reason: 'unresolved', attempts: attempt - 1 };
      }
      if (current.outcome === 'present') cache?.set(chatId, { etag: current.etag, cursor: current.cursor });
      claimed = undeliveredIds(current.cursor, candidateIds);
      if (claimed.length === 0) return { claimed: [], reason: null, attempts: attempt - 1 };
    }
    const merged = mergedChatCursor(current.cursor, candidateIds, options.lastTs ?? null, clock());
    const outcome = await conditionalWrite(
      store,
      key,
      formatChatCursor(merged),
      current.outcome === 'absent' ? { ifAbsent: true } : { ifMatch: current.etag },
    );
    if (outcome.result === 'won') {
      cache?.set(chatId, { etag: outcome.etag, cursor: merged });
      return { claimed, reason: null, attempts: attempt };
    }
    cache?.delete(chatId);
    if (outcome.result !== 'lost') return { claimed: [], reason: 'unresolved', attempts: attempt };
  }
  return { claimed: [], reason: 'contention', attempts: CLAIM_MAX_ATTEMPTS };
}
