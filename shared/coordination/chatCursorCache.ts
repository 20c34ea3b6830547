import { type Lru, lru } from '../lru';
import type { CachedChatCursor, TenantChatCursorCache } from './chatCursors';

/**
 * The last version of each chat cursor this instance read or wrote, per tenant, so that a claim
 * can go straight to its conditional write instead of reading first (half the storage calls of an
 * uncontended claim).
 *
 * Nothing relies on it being current: an entry is only ever used as the If-Match of a
 * compare-and-swap, and ETags change on every write and are never reused, so a write with a cached
 * ETag lands only when the stored cursor is exactly the cached one. A stale entry costs one lost
 * write, after which the claim reads the cursor as it would have anyway. It is never used to
 * decide that there is nothing to claim (that always reads), and it is dropped whenever a read or
 * write of the cursor is uncertain. Bounded: the least recently used entries go first.
 */
export class ChatCursorCache {
  private readonly entries: Lru<string, CachedChatCursor>;

  constructor(capacity = 4096) {
    this.entries = lru(capacity);
  }

  forTenant(tenant: string): TenantChatCursorCache {
    // Tenant ids cannot contain "/", so the pair is unambiguous.
    const keyOf = (chatId: string) => `${tenant}/${chatId}`;
    return {
      get: (chatId) => this.entries.get(keyOf(chatId)),
      set: (chatId, entry) => this.entries.set(keyOf(chatId), entry),
      delete: (chatId) => this.entries.delete(keyOf(chatId)),
    };
  }

  get size(): number {
    return this.entries.size;
  }
}
