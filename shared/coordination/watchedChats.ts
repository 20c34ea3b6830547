import { InvalidArgumentError } from '../protocol/errors';
import type { KeyValueStore } from '../storage/keyValueStore';
import { isValidChatId } from './chatIds';
import { conditionalWrite, decodeUtf8, parseJson, readOutcome } from './conditionalWrite';

/**
 * The shared list of watched chats (`watched_chats`), one JSON array of chat ids:
 *
 *     ["19:abc@thread.v2","19:def@unq.gbl.spaces"]
 *
 * Entries that cannot be chat ids (see chatIds.ts) are dropped on read: each id ends up in a URL
 * path. Being on the list grants nothing. Reads and merges never throw for a storage failure.
 */

export const WATCHED_CHATS_KEY = 'watched_chats';
export const WATCHED_CHATS_MAX_ATTEMPTS = 4;
/** A merge that would make the list longer than this is refused (the value stays small). */
export const MAX_WATCHED_CHATS = 10_000;

export type WatchedChatsRead =
  | { readonly outcome: 'present'; readonly chatIds: string[]; readonly etag: string }
  | { readonly outcome: 'absent'; readonly chatIds: []; readonly etag: null }
  | { readonly outcome: 'unresolved'; readonly chatIds: []; readonly etag: null; readonly problem: string };

export interface WatchedChatsWrite {
  /** False when the merge could not be stored (conflicts, a storage failure, an unreadable list). */
  readonly persisted: boolean;
  /** The ids this call added (not listed before); empty when nothing was persisted. */
  readonly added: string[];
}

/**
 * Reads the list with its ETag: `present`, `absent`, or `unresolved` (failed read, a value that is
 * not a JSON array, or no ETag). Invalid entries are dropped; duplicates are kept once.
 */
export async function readWatchedChats(store: KeyValueStore): Promise<WatchedChatsRead> {
  const read = await readOutcome(store, WATCHED_CHATS_KEY);
  if (!read.ok) return { outcome: 'unresolved', chatIds: [], etag: null, problem: 'the read failed' };
  if (read.stored === null) return { outcome: 'absent', chatIds: [], etag: null };
  if (read.stored.etag === '') {
    return { outcome: 'unresolved', chatIds: [], etag: null, problem: 'the value came without an ETag' };
  }
  const text = decodeUtf8(read.stored.value);
  const list = text === null ? undefined : parseJson(text);
  if (!Array.isArray(list)) {
    return { outcome: 'unresolved', chatIds: [], etag: null, problem: 'the value is not a JSON array' };
  }
  const chatIds = [
    ...new Set(list.filter((entry): entry is string => typeof entry === 'string' && isValidChatId(entry))),
  ];
  return { outcome: 'present', chatIds, etag: read.stored.etag };
}

/**
 * Merges `chatIds` (valid chat ids: the caller validates them) into the list: read with ETag, merge,
 * write with If-Match (create-only when the list is absent), up to {@link WATCHED_CHATS_MAX_ATTEMPTS}
 * times on conflict. Never throws for a conflict or a storage failure: `persisted: false` tells the
 * caller to keep those chats dirty and try again later. A list that cannot be read is never
 * overwritten. Nothing is written when every id is already listed. Throws InvalidArgumentError when
 * the list would grow past {@link MAX_WATCHED_CHATS}.
 */
export async function addWatchedChats(
  store: KeyValueStore,
  chatIds: readonly string[],
): Promise<WatchedChatsWrite> {
  for (let attempt = 0; attempt < WATCHED_CHATS_MAX_ATTEMPTS; attempt++) {
    const current = await readWatchedChats(store);
    if (current.outcome === 'unresolved') return { persisted: false, added: [] };
    const listed = new Set(current.chatIds);
    const added = [...new Set(chatIds)].filter((id) => !listed.has(id));
    if (added.length === 0) return { persisted: true, added: [] };
    const merged = [...current.chatIds, ...added];
    if (merged.length > MAX_WATCHED_CHATS) {
      // The caller's request, not the storage, is at fault: 400, nothing written.
      throw new InvalidArgumentError('chatIds', `the watched list would exceed ${MAX_WATCHED_CHATS} chats`);
    }
    const outcome = await conditionalWrite(
      store,
      WATCHED_CHATS_KEY,
      Buffer.from(JSON.stringify(merged) + '\n'),
      current.outcome === 'absent' ? { ifAbsent: true } : { ifMatch: current.etag },
    );
    if (outcome.result === 'won') return { persisted: true, added };
    if (outcome.result !== 'lost') return { persisted: false, added: [] };
  }
  return { persisted: false, added: [] };
}
