import type {
  ChatClaim as ChatClaimSchema,
  ChatCursor as ChatCursorSchema,
  ChatCursorRead as ChatCursorReadSchema,
  EmailClaim,
  EmailClaimOutcome,
  EmailCursor,
  Interaction,
  interactionBody,
  promiseBody,
  PromiseRecord as PromiseRecordSchema,
  WatchedChats,
  WatchedChatsAdded,
} from '@cairn-state/protocol/coordination';
import type { z } from 'zod';

import { readJson, segment, type Transport } from './transport.js';
import type { Wire } from './wire.js';

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

/**
 * The cursor (RFC 3339 UTC time the next window starts from; null unless present) and the version
 * read (`etag`: pass it to {@link CoordinationClient.claimEmailWindow}).
 */
export type EmailCursorRead = Wire<z.output<typeof EmailCursor>>;

/** The end of the window being claimed, the ETag of the cursor as read, a claim id unique per claim. */
export type EmailClaimRequest = Wire<z.input<typeof EmailClaim>>;

/** `won`: the window is this caller's; `lost`: another's; `failed`: nothing written; `unknown`: settle it. */
export type EmailClaimResult = z.output<typeof EmailClaimOutcome>['result'];

export type WatchedChatsRead = Wire<z.output<typeof WatchedChats>>;

/** Whether the merged list was stored, and the ids this call added (not listed before). */
export type WatchedChatsWrite = Wire<z.output<typeof WatchedChatsAdded>>;

export type ChatCursor = Wire<z.output<typeof ChatCursorSchema>>;

export type ChatCursorRead = Wire<z.output<typeof ChatCursorReadSchema>>;

/** The candidate ids this caller now owns (deliver exactly these), and why nothing was claimed when so. */
export type ChatClaim = Wire<z.output<typeof ChatClaimSchema>>;

/** A promise to record; `dueBy` is RFC 3339. */
export type NewPromise = Wire<z.input<typeof promiseBody>>;

export type PromiseRecord = Wire<z.output<typeof PromiseRecordSchema>>;

export type NewInteraction = Wire<z.input<typeof interactionBody>>;

/** An entry of the log; `ts` is RFC 3339 UTC, the entry is in the log of this time's UTC day. */
export type InteractionEntry = Wire<z.output<typeof Interaction>>;

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
