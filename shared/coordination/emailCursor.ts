import { z } from 'zod';

import { CLAIM_ID_PATTERN } from '../protocol/coordination';
import type { KeyValueStore } from '../storage/keyValueStore';
import { conditionalWrite, decodeUtf8, parseJson, readOutcome, type WriteOutcome } from './conditionalWrite';
import { compareTimestamps, isRfc3339 } from './timestamps';

/**
 * The shared email cursor of a tenant: the instant up to which mail has been
 * claimed by some instance of the fleet. Instances claim the window from the cursor to "now" with
 * ONE conditional write (If-Match the version they read) and no retry on conflict: losing means
 * another instance owns that window. None of these functions throws for a storage failure.
 *
 * ## Stored value (`poll_state/email_cursor.txt`)
 *
 * One line of JSON, cursor first, readable with the key/value API:
 *
 *     {"cursor":"2026-11-29T21:16:51.123Z","recentClaims":["c1","c2"],"pendingWindows":[]}
 *
 * - `cursor`: RFC 3339; the end of the last claimed window.
 * - `recentClaims`: the last {@link RECENT_CLAIMS_LIMIT} claim ids (the claimer's `priorClaims` plus
 *   its own `claimId`), so that after a write with an unknown outcome a reader can tell whose write
 *   landed ({@link settleEmailCursorWrite}).
 * - `pendingWindows`: windows the `emailWindowPoll` timer claimed but has not yet confirmed on the
 *   queue, each leased to the run that is enqueueing it until `leaseExpires` (see emailWindowPoll.ts).
 *   Every writer carries them over unchanged, so a claim made through the API never drops them.
 *
 * A value that is just an RFC 3339 timestamp (the format older agents write, or one written by hand) is read as
 * a cursor with no recent claims and no pending windows. Anything else (invalid JSON, unknown
 * fields, a cursor that is not RFC 3339) is `unresolved`: never `absent`, and never overwritten.
 */

export const EMAIL_CURSOR_KEY = 'poll_state/email_cursor.txt';

/** How many claim ids the cursor remembers: settle works as long as ours is among them. */
export const RECENT_CLAIMS_LIMIT = 16;

/** Claim ids: 1-128 characters of `[A-Za-z0-9._:-]` (a UUID from {@link newClaimId} fits). */
export { CLAIM_ID_PATTERN };

export interface PendingWindow {
  readonly from: string;
  readonly to: string;
  readonly claimId: string;
  /** Until then the run that wrote this lease is enqueueing the window; afterwards any run may. */
  readonly leaseExpires: string;
}

export interface EmailCursorState {
  readonly cursor: string;
  readonly recentClaims: readonly string[];
  readonly pendingWindows: readonly PendingWindow[];
}

export type EmailCursorOutcome = 'present' | 'absent' | 'unresolved';

interface NoEmailCursor<Outcome extends EmailCursorOutcome> {
  readonly outcome: Outcome;
  readonly cursor: null;
  readonly etag: null;
  readonly recentClaims: readonly [];
  readonly pendingWindows: readonly [];
}

export type EmailCursorRead =
  | ({ readonly outcome: 'present'; readonly etag: string } & EmailCursorState)
  | NoEmailCursor<'absent'>
  /** `problem` says why (for the log; never sent to callers). */
  | (NoEmailCursor<'unresolved'> & { readonly problem: string });

export type PresentEmailCursor = Extract<EmailCursorRead, { outcome: 'present' }>;

export type EmailClaim = 'won' | 'lost' | 'failed' | 'unknown' | 'backwards';

/** What a caller asks to claim: `claim(newCursor, etag, claimId, priorClaims)`. */
export interface EmailClaimRequest {
  readonly newCursor: string;
  /** The ETag of the cursor version the window starts from, as read. */
  readonly etag: string;
  readonly claimId: string;
  readonly priorClaims: readonly string[];
}

const timestamp = z.string().refine(isRfc3339, 'must be an RFC 3339 timestamp');
const claimId = z.string().regex(CLAIM_ID_PATTERN);

const storedSchema = z.strictObject({
  cursor: timestamp,
  recentClaims: z.array(claimId).default([]),
  pendingWindows: z
    .array(z.strictObject({ from: timestamp, to: timestamp, claimId, leaseExpires: timestamp }))
    .default([]),
});

/** The state in a stored value, or a description of why it is not one. */
export function parseEmailCursorValue(bytes: Buffer): EmailCursorState | { problem: string } {
  const text = decodeUtf8(bytes);
  if (text === null) return { problem: 'the value is not UTF-8' };
  const trimmed = text.trim();
  if (isRfc3339(trimmed)) return { cursor: trimmed, recentClaims: [], pendingWindows: [] };
  const parsed = storedSchema.safeParse(parseJson(trimmed));
  if (!parsed.success) return { problem: 'the value is neither an RFC 3339 timestamp nor a cursor record' };
  return parsed.data;
}

export function formatEmailCursorValue(state: EmailCursorState): Buffer {
  return Buffer.from(
    JSON.stringify({
      cursor: state.cursor,
      recentClaims: state.recentClaims,
      pendingWindows: state.pendingWindows.map(({ from, to, claimId, leaseExpires }) => ({
        from,
        to,
        claimId,
        leaseExpires,
      })),
    }) + '\n',
  );
}

/** `priorClaims` plus `claimId`, newest last, at most {@link RECENT_CLAIMS_LIMIT}. */
export function recentClaimsWith(priorClaims: readonly string[], claimId: string): string[] {
  return [...priorClaims.filter((id) => id !== claimId), claimId].slice(-RECENT_CLAIMS_LIMIT);
}

function unresolved(problem: string): EmailCursorRead {
  return { outcome: 'unresolved', cursor: null, etag: null, recentClaims: [], pendingWindows: [], problem };
}

/**
 * Reads the cursor: `present` with its ETag, `absent` (the read succeeded and found nothing), or
 * `unresolved`: the read failed, the value is not understood, or it came without an ETag (it could
 * not be swapped safely). Never throws.
 */
export async function readEmailCursor(store: KeyValueStore): Promise<EmailCursorRead> {
  const read = await readOutcome(store, EMAIL_CURSOR_KEY);
  if (!read.ok) return unresolved('the read failed');
  if (read.stored === null) {
    return { outcome: 'absent', cursor: null, etag: null, recentClaims: [], pendingWindows: [] };
  }
  if (read.stored.etag === '') return unresolved('the value came without an ETag');
  const state = parseEmailCursorValue(read.stored.value);
  if ('problem' in state) return unresolved(state.problem);
  return { outcome: 'present', etag: read.stored.etag, ...state };
}

export type EmailCursorInitialization = 'created' | 'exists' | 'failed' | 'unknown';

/**
 * Creates the cursor at `now`, create-only: of two instances initialising at once exactly one
 * creates it; the other (and every later call) is told `exists`. `unknown` when the write may have
 * landed. Never overwrites a cursor, whatever it holds.
 */
export async function initializeEmailCursor(
  store: KeyValueStore,
  now: string,
): Promise<EmailCursorInitialization> {
  const state: EmailCursorState = { cursor: now, recentClaims: [], pendingWindows: [] };
  const outcome = await conditionalWrite(store, EMAIL_CURSOR_KEY, formatEmailCursorValue(state), {
    ifAbsent: true,
  });
  switch (outcome.result) {
    case 'won':
      return 'created';
    case 'lost':
      return 'exists';
    default:
      return outcome.result;
  }
}

/** Replaces the cursor version `etag` with `state`: one conditional write, never retried here. */
export function writeEmailCursor(
  store: KeyValueStore,
  etag: string,
  state: EmailCursorState,
): Promise<WriteOutcome> {
  return conditionalWrite(store, EMAIL_CURSOR_KEY, formatEmailCursorValue(state), { ifMatch: etag });
}

/**
 * The value a caller's claim writes over `current`: its cursor and claims, the pending windows kept;
 * null when `newCursor` is before the cursor (the window would overlap the last one claimed).
 */
function claimedState(current: PresentEmailCursor, request: EmailClaimRequest): EmailCursorState | null {
  if (compareTimestamps(request.newCursor, current.cursor) < 0) return null;
  return {
    cursor: request.newCursor,
    recentClaims: recentClaimsWith(request.priorClaims, request.claimId),
    pendingWindows: current.pendingWindows,
  };
}

/**
 * Claims the window up to `newCursor` from the cursor version `etag`: one conditional write, no
 * retry on conflict.
 *
 * - `won`: the cursor moved to `newCursor`, carrying `claimId`; the window is the caller's.
 * - `lost`: the cursor is no longer at `etag` (another instance owns the window); nothing written.
 * - `failed`: nothing was written (the cursor could not be read, it is not understood, or the store
 *   refused the write).
 * - `unknown`: the write may have landed; call {@link settleEmailClaim} with the same request.
 * - `backwards`: the cursor is at `etag` but `newCursor` is before it; nothing written. Windows are
 *   contiguous and never overlap, so the cursor never moves back (the API answers 400 `newCursor`).
 *
 * The cursor is read first (no write) to carry its pending windows over; a version other than
 * `etag` is `lost` without writing, exactly as the conditional write would have answered.
 */
export async function claimEmailWindow(
  store: KeyValueStore,
  request: EmailClaimRequest,
): Promise<EmailClaim> {
  const current = await readEmailCursor(store);
  if (current.outcome === 'unresolved') return 'failed';
  if (current.outcome === 'absent' || current.etag !== request.etag) return 'lost';
  const state = claimedState(current, request);
  if (state === null) return 'backwards';
  return (await writeEmailCursor(store, request.etag, state)).result;
}

/**
 * Settles a claim whose outcome was `unknown`: true ours, false lost, null cannot tell. See
 * {@link settleEmailCursorWrite}; the value retried is the one {@link claimEmailWindow} wrote. A
 * `newCursor` before the unmoved cursor is false: such a claim is refused and never written.
 */
export function settleEmailClaim(store: KeyValueStore, request: EmailClaimRequest): Promise<boolean | null> {
  return settleEmailCursorWrite(store, request.etag, request.claimId, (current) =>
    claimedState(current, request),
  );
}

/**
 * After a write of the cursor version `etag` with an unknown outcome, reads the cursor back:
 *
 * - not moved (still `etag`): retries the identical conditional write. Whichever of the original and
 *   the retry commits first leaves the other with a stale If-Match, so a timed-out original cannot
 *   commit after this call has answered. Won → true; lost → read again and decide as below.
 * - moved: true exactly when `claimId` is among its recent claims, else false.
 * - absent, unresolved, or a read or retry that fails: null (cannot tell).
 *
 * `stateFor` rebuilds the value the original write carried from the unmoved version; null when no
 * such write is ever made from that version (false).
 */
export async function settleEmailCursorWrite(
  store: KeyValueStore,
  etag: string,
  claimId: string,
  stateFor: (current: PresentEmailCursor) => EmailCursorState | null,
): Promise<boolean | null> {
  const current = await readEmailCursor(store);
  if (current.outcome !== 'present') return null;
  if (current.etag !== etag) return current.recentClaims.includes(claimId);
  const state = stateFor(current);
  if (state === null) return false;
  const retry = await writeEmailCursor(store, etag, state);
  if (retry.result === 'won') return true;
  if (retry.result !== 'lost') return null;
  const after = await readEmailCursor(store);
  return after.outcome === 'present' ? after.recentClaims.includes(claimId) : null;
}
