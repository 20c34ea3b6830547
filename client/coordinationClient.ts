import { readJson, segment, type Transport } from './transport';

/**
 * Fleet coordination: the email poll cursor, the watched chats, chat cursors and delivery claims,
 * promises and the interaction log. Everything lives in the tenant's key/value space.
 *
 * Reads that could not decide say so (`outcome: 'unresolved'`) instead of failing; refusals are
 * thrown as `CairnHttpError`. Claims, appends and creations are not idempotent: after a timeout or
 * a cut connection they are not sent again (see the transport), and `CairnNetworkError` leaves the
 * caller to settle them (for an email claim: {@link CoordinationClient.settleEmailClaim}).
 */

/** `present`: read; `absent`: nothing stored; `unresolved`: the read failed or the value is unusable. */
export type ReadOutcome = 'present' | 'absent' | 'unresolved';

export interface EmailCursorRead {
  readonly outcome: ReadOutcome;
  /** RFC 3339 UTC time the next window starts from; null unless present. */
  readonly cursor: string | null;
  /** The version read: pass it to {@link CoordinationClient.claimEmailWindow}. */
  readonly etag: string | null;
  readonly recentClaims: readonly string[];
}

export interface EmailClaimRequest {
  /** The end of the window being claimed (RFC 3339). */
  readonly newCursor: string;
  /** The ETag of the cursor as read. */
  readonly etag: string;
  /** 1-128 characters of `[A-Za-z0-9._:-]`, unique per claim. */
  readonly claimId: string;
  readonly priorClaims?: readonly string[];
}

/** `won`: the window is this caller's; `lost`: another's; `failed`: nothing written; `unknown`: settle it. */
export type EmailClaimResult = 'won' | 'lost' | 'failed' | 'unknown';

export interface WatchedChatsRead {
  readonly outcome: ReadOutcome;
  readonly chatIds: readonly string[];
  readonly etag: string | null;
}

export interface WatchedChatsWrite {
  /** False when the merged list could not be stored. */
  readonly persisted: boolean;
  /** The ids this call added (not listed before). */
  readonly added: readonly string[];
}

export interface ChatCursor {
  readonly lastTs: string | null;
  readonly seenIdsTail: readonly string[];
  readonly bootstrapped: boolean;
  readonly lastWrittenAt: string | null;
}

export interface ChatCursorRead {
  readonly outcome: ReadOutcome;
  readonly cursor: ChatCursor | null;
}

export interface ChatClaim {
  /** The candidate ids this caller now owns: deliver exactly these. */
  readonly claimed: readonly string[];
  /** Null when the cursor was read (and written if needed); otherwise why nothing was claimed. */
  readonly reason: 'unresolved' | 'contention' | null;
}

export interface NewPromise {
  readonly chatId: string;
  readonly description: string;
  /** RFC 3339. */
  readonly dueBy?: string | null;
}

export interface PromiseRecord {
  readonly id: string;
  readonly createdAt: string;
  readonly chatId: string;
  readonly description: string;
  readonly dueBy: string | null;
  readonly status: 'open' | 'resolved';
  readonly resolvedAt?: string;
  readonly resolution?: string;
}

export interface NewInteraction {
  readonly channel: string;
  readonly direction: 'inbound' | 'outbound';
  readonly sender: string;
  readonly summary: string;
  readonly recipient?: string;
  readonly action?: string;
  readonly contentRef?: string;
  readonly metadata?: Record<string, unknown>;
}

export interface InteractionEntry extends Omit<NewInteraction, 'direction'> {
  readonly id: string;
  /** RFC 3339 UTC; the entry is in the log of this time's UTC day. */
  readonly ts: string;
  readonly direction: string;
}

export class CoordinationClient {
  constructor(private readonly transport: Transport) {}

  async readEmailCursor(): Promise<EmailCursorRead> {
    return readJson(await this.transport.call('GET', '/poll/email-cursor'), 200);
  }

  /** Creates the cursor at `now` (default: the service's clock) unless it exists; true if this call did. */
  async initEmailCursor(options: { readonly now?: string } = {}): Promise<boolean> {
    const reply = await this.transport.call('POST', '/poll/email-cursor/init', { json: options });
    return (await readJson<{ initialized: boolean }>(reply, 200)).initialized;
  }

  /** One conditional move of the cursor to `newCursor`; never retried on a conflict. */
  async claimEmailWindow(request: EmailClaimRequest): Promise<EmailClaimResult> {
    const reply = await this.transport.call('POST', '/poll/email-cursor/claim', { json: request });
    return (await readJson<{ result: EmailClaimResult }>(reply, 200)).result;
  }

  /**
   * Decides a claim whose result was `unknown` (or whose answer was lost): true ours, false lost,
   * null cannot tell yet. Idempotent by claim id, so it is retried like a read.
   */
  async settleEmailClaim(request: EmailClaimRequest): Promise<boolean | null> {
    const reply = await this.transport.call('POST', '/poll/email-cursor/settle', {
      json: request,
      idempotent: true,
    });
    return (await readJson<{ result: boolean | null }>(reply, 200)).result;
  }

  async getWatchedChats(): Promise<WatchedChatsRead> {
    return readJson(await this.transport.call('GET', '/poll/watched-chats'), 200);
  }

  /** Adds chat ids to the watched list (a set: ids listed before are not added again). */
  async addWatchedChats(chatIds: readonly string[]): Promise<WatchedChatsWrite> {
    const reply = await this.transport.call('POST', '/poll/watched-chats', { json: { chatIds } });
    return readJson(reply, 200);
  }

  async readChatCursor(chatId: string): Promise<ChatCursorRead> {
    return readJson(await this.transport.call('GET', `/chats/${segment(chatId)}/cursor`), 200);
  }

  /**
   * Claims the candidate message ids of a chat that no caller has claimed yet: across all
   * concurrent callers each id is claimed exactly once. Anything uncertain claims nothing.
   */
  async claimChatMessages(
    chatId: string,
    request: { readonly candidateIds: readonly string[]; readonly lastTs?: string | null },
  ): Promise<ChatClaim> {
    const reply = await this.transport.call('POST', `/chats/${segment(chatId)}/claims`, { json: request });
    return readJson(reply, 200);
  }

  async addPromise(promise: NewPromise): Promise<PromiseRecord> {
    return readJson(await this.transport.call('POST', '/promises', { json: promise }), 201);
  }

  /** Open promises (default) or all of them, oldest first. */
  async listPromises(status: 'open' | 'all' = 'open'): Promise<PromiseRecord[]> {
    const reply = await this.transport.call('GET', '/promises', { query: { status } });
    return (await readJson<{ promises: PromiseRecord[] }>(reply, 200)).promises;
  }

  /** Resolves a promise; resolving it again changes nothing (so it is retried like a read). */
  async resolvePromise(id: string, resolution: string): Promise<PromiseRecord> {
    const reply = await this.transport.call('POST', `/promises/${segment(id)}/resolve`, {
      json: { resolution },
      idempotent: true,
    });
    return readJson(reply, 200);
  }

  /** Appends an entry to the log of the current UTC day. */
  async appendInteraction(interaction: NewInteraction): Promise<InteractionEntry> {
    return readJson(await this.transport.call('POST', '/interactions', { json: interaction }), 201);
  }

  /** The entries of one UTC day (`YYYY-MM-DD`), in the order they were appended. */
  async readInteractions(day: string): Promise<InteractionEntry[]> {
    const reply = await this.transport.call('GET', `/interactions/${segment(day)}`);
    return (await readJson<{ entries: InteractionEntry[] }>(reply, 200)).entries;
  }
}
