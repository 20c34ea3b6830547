import type { ChatCursor } from './chatCursors';

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
export interface CachedChatCursor {
  readonly etag: string;
  readonly cursor: ChatCursor;
}

/** The cache seen from one tenant's claims. */
export interface TenantChatCursorCache {
  get(chatId: string): CachedChatCursor | undefined;
  set(chatId: string, entry: CachedChatCursor): void;
  delete(chatId: string): void;
}

export class ChatCursorCache {
  private readonly entries = new Map<string, CachedChatCursor>();

  constructor(private readonly capacity = 4096) {}

  forTenant(tenant: string): TenantChatCursorCache {
    // Tenant ids cannot contain "/", so the pair is unambiguous.
    const keyOf = (chatId: string) => `${tenant}/${chatId}`;
    return {
      get: (chatId) => {
        const key = keyOf(chatId);
        const entry = this.entries.get(key);
        if (entry !== undefined) {
          // Most recently used last.
          this.entries.delete(key);
          this.entries.set(key, entry);
        }
        return entry;
      },
      set: (chatId, entry) => {
        const key = keyOf(chatId);
        this.entries.delete(key);
        this.entries.set(key, entry);
        if (this.entries.size > this.capacity) {
          const oldest = this.entries.keys().next();
          if (oldest.done !== true) this.entries.delete(oldest.value);
        }
      },
      delete: (chatId) => {
        this.entries.delete(keyOf(chatId));
      },
    };
  }

  get size(): number {
    return this.entries.size;
  }
}
