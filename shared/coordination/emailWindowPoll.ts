import { randomUUID } from 'node:crypto';

import type { Logger } from '../logging';
import { errorSummary } from '../logging';
import { casPause } from '../retry';
import type { KeyValueStore, KeyValueStoreFactory } from '../storage/keyValueStore';
import {
  type EmailCursorState,
  initializeEmailCursor,
  type PendingWindow,
  type PresentEmailCursor,
  readEmailCursor,
  recentClaimsWith,
  settleEmailCursorWrite,
  writeEmailCursor,
} from './emailCursor';
import type { EmailPollTenantRegistry } from './emailPollTenants';
import type { EmailWindowMessage, EmailWindowQueue } from './emailWindowQueue';
import { compareTimestamps, formatTimestamp } from './timestamps';

/**
 * The `emailWindowPoll` timer's work: for every registered tenant, claim the email window from the
 * cursor to now and put it on the queue, each window exactly once however many runs overlap.
 *
 * ## Why "claim, then enqueue, then confirm", with the window recorded in the claim
 *
 * The queue and the cursor cannot change in one transaction, so one of them must go first:
 *
 * - Enqueue first, claim second: a run that enqueues and then loses the claim (or dies before it)
 *   leaves a message for a window another run also enqueues. Queue Storage has no deduplication and
 *   no client-chosen message ids, so the extra message cannot be withdrawn reliably. Rejected.
 * - Claim first, enqueue second, but with the claimed window written into the
 *   cursor in the same conditional write (`pendingWindows`, leased to the claiming run): if the
 *   enqueue then fails, or the run dies, the window is not lost. It stays in the cursor until a
 *   run enqueues it and removes it (the "confirm" write). A failed send releases the lease at once,
 *   so the next run (a minute later) sends it again; a run that died holds the lease until it
 *   expires ({@link WINDOW_LEASE_MS}), and then any run takes the window over, with a conditional
 *   write of its own so that exactly one does.
 *
 * Overlapping runs: only the run whose conditional write wins owns the windows it wrote; the others
 * lose the write and enqueue nothing. A run whose claim has an unknown outcome settles it (reads
 * back, retries the identical write); when it cannot tell, it enqueues nothing, and the window, if
 * the write landed, is taken over after the lease.
 *
 * What remains: a send whose outcome is unknown (a timeout after the message reached the queue), or
 * a run that dies between a successful send and its confirm, leaves the window pending, and it is
 * sent again after the lease: the same message, same `claimId`, so consumers can drop it. That is the
 * one duplicate the design cannot rule out, and the price of never losing a window.
 */

/** How long a claiming run owns the windows it wrote before another run may take them over. */
export const WINDOW_LEASE_MS = 5 * 60_000;
/**
 * A run stops sending this long before its lease ends (at most a fifth of the lease), so that no
 * takeover can overlap a send; clocks of instances may differ by less than this.
 */
const LEASE_SAFETY_MS = 60_000;
/**
 * While this many windows are pending (the queue is failing), no new window is claimed: the cursor
 * stays, the next window simply starts from it later, and the stored value stays small.
 */
export const MAX_PENDING_WINDOWS = 32;
/**
 * A confirmation that cannot be written leaves its windows to be sent again once their lease ends
 * (a duplicate with the same claim id), so it tries harder than a claim: up to this many writes,
 * with jittered backoff while other runs write the same cursor.
 */
const CONFIRM_MAX_ATTEMPTS = 8;
const TENANT_CONCURRENCY = 4;

export type TenantPollOutcome =
  /** Every window this run owned was enqueued and confirmed. */
  | 'enqueued'
  /** The cursor is at now (or windows are pending under another run's lease): nothing to claim. */
  | 'nothing_to_claim'
  /** Another run's conditional write got there first; it owns the window. */
  | 'lost'
  /** The tenant registered, but its cursor is absent: nothing is claimed (never re-created here). */
  | 'cursor_absent'
  /** The cursor could not be read or is not understood: nothing is claimed or overwritten. */
  | 'cursor_unresolved'
  /** The claim certainly did not land. */
  | 'claim_failed'
  /** The claim may have landed and settling could not tell: nothing enqueued; the lease decides. */
  | 'claim_unknown'
  /** Some windows could not be enqueued; their lease was released for the next run. */
  | 'enqueue_failed'
  /** Windows were enqueued but could not be removed from the cursor: they may be sent again. */
  | 'confirm_failed'
  /** An unexpected error. */
  | 'error';

export interface TenantPollReport {
  readonly tenant: string;
  readonly outcome: TenantPollOutcome;
  readonly claimId?: string;
  /** The messages this run put on the queue. */
  readonly enqueued: readonly EmailWindowMessage[];
  readonly error?: unknown;
}

const FAILURES: ReadonlySet<TenantPollOutcome> = new Set([
  'cursor_unresolved',
  'claim_failed',
  'claim_unknown',
  'enqueue_failed',
  'confirm_failed',
  'error',
]);

/** True for outcomes that need attention (the timer invocation fails when any tenant has one). */
export function isPollFailure(outcome: TenantPollOutcome): boolean {
  return FAILURES.has(outcome);
}

export interface EmailWindowPollOptions {
  readonly kvStores: KeyValueStoreFactory;
  readonly registry: EmailPollTenantRegistry;
  readonly queue: EmailWindowQueue;
  readonly log: Logger;
  /** The clock (tests move it); `new Date()` by default. */
  readonly now?: () => Date;
  readonly leaseMs?: number;
  readonly newClaimId?: () => string;
}

/** A new claim id: a random UUID. */
export function newClaimId(): string {
  return randomUUID();
}

/**
 * Polls every registered tenant (a few at a time) and returns one report per tenant. Per-tenant
 * failures are reported, logged and do not stop the others; a registry that cannot be listed
 * throws (after the tenants already listed were polled).
 */
export async function pollEmailWindows(options: EmailWindowPollOptions): Promise<TenantPollReport[]> {
  const reports: TenantPollReport[] = [];
  const running = new Set<Promise<void>>();
  for await (const tenant of options.registry.tenants()) {
    const task = pollTenant(tenant, options).then((report) => {
      reports.push(report);
      running.delete(task);
    });
    running.add(task);
    if (running.size >= TENANT_CONCURRENCY) await Promise.race(running);
  }
  await Promise.all(running);
  return reports.sort((a, b) => (a.tenant < b.tenant ? -1 : a.tenant > b.tenant ? 1 : 0));
}

interface ClaimPlan {
  readonly claimId: string;
  readonly leaseExpires: string;
  /** The windows this run owns if its write wins, oldest first. */
  readonly owned: readonly PendingWindow[];
  readonly state: EmailCursorState;
}

/**
 * What this run writes over `current` at `now`: the expired pending windows taken over, plus the new
 * window from the cursor to now (unless it is empty or too many windows are pending), all leased to
 * this run. Null when there is nothing to own.
 */
export function planEmailClaim(
  current: PresentEmailCursor,
  now: Date,
  claimId: string,
  leaseMs: number = WINDOW_LEASE_MS,
): ClaimPlan | null {
  const nowText = formatTimestamp(now);
  const leaseExpires = formatTimestamp(new Date(now.getTime() + leaseMs));
  const expired = (window: PendingWindow) => compareTimestamps(window.leaseExpires, nowText) <= 0;
  const takenOver = current.pendingWindows.filter(expired).map((window) => ({ ...window, leaseExpires }));
  const stillLeased = current.pendingWindows.filter((window) => !expired(window));
  const claimNew =
    compareTimestamps(nowText, current.cursor) > 0 && current.pendingWindows.length < MAX_PENDING_WINDOWS;
  const owned = claimNew
    ? [...takenOver, { from: current.cursor, to: nowText, claimId, leaseExpires }]
    : takenOver;
  if (owned.length === 0) return null;
  return {
    claimId,
    leaseExpires,
    owned,
    state: {
      cursor: claimNew ? nowText : current.cursor,
      recentClaims: recentClaimsWith(current.recentClaims, claimId),
      pendingWindows: [...stillLeased, ...owned].sort((a, b) => compareTimestamps(a.from, b.from)),
    },
  };
}

async function pollTenant(tenant: string, options: EmailWindowPollOptions): Promise<TenantPollReport> {
  const log = options.log.child({ tenant });
  let report: TenantPollReport;
  try {
    report = await claimAndEnqueue(tenant, options);
  } catch (error) {
    report = { tenant, outcome: 'error', enqueued: [], error };
  }
  const fields = {
    outcome: report.outcome,
    ...(report.claimId === undefined ? {} : { claimId: report.claimId }),
    windows: report.enqueued.map(({ from, to, claimId }) => ({ from, to, claimId })),
    ...(report.error === undefined ? {} : { err: errorSummary(report.error) }),
  };
  if (isPollFailure(report.outcome)) log.warn(fields, 'email window poll');
  else log.info(fields, 'email window poll');
  return report;
}

async function claimAndEnqueue(tenant: string, options: EmailWindowPollOptions): Promise<TenantPollReport> {
  const clock = options.now ?? (() => new Date());
  const store = options.kvStores.forTenant(tenant);
  const current = await readEmailCursor(store);
  if (current.outcome === 'absent') return { tenant, outcome: 'cursor_absent', enqueued: [] };
  if (current.outcome === 'unresolved') return { tenant, outcome: 'cursor_unresolved', enqueued: [] };

  const plan = planEmailClaim(current, clock(), (options.newClaimId ?? newClaimId)(), options.leaseMs);
  if (plan === null) return { tenant, outcome: 'nothing_to_claim', enqueued: [] };
  const { claimId } = plan;

  const claim = await writeEmailCursor(store, current.etag, plan.state);
  let claimEtag: string | null = null;
  if (claim.result === 'won') {
    claimEtag = claim.etag;
  } else if (claim.result === 'lost') {
    return { tenant, outcome: 'lost', claimId, enqueued: [] };
  } else if (claim.result === 'failed') {
    return { tenant, outcome: 'claim_failed', claimId, enqueued: [], error: claim.error };
  } else {
    const ours = await settleEmailCursorWrite(store, current.etag, claimId, () => plan.state);
    if (ours === null) return { tenant, outcome: 'claim_unknown', claimId, enqueued: [], error: claim.error };
    if (!ours) return { tenant, outcome: 'lost', claimId, enqueued: [] };
  }

  // The windows are ours until the lease ends: send them in order, stop at the first failure.
  const sent: EmailWindowMessage[] = [];
  let sendError: unknown;
  const leaseMs = options.leaseMs ?? WINDOW_LEASE_MS;
  const sendBefore = Date.parse(plan.leaseExpires) - Math.min(LEASE_SAFETY_MS, leaseMs / 5);
  for (const window of plan.owned) {
    if (clock().getTime() >= sendBefore) break;
    const message = { tenant, from: window.from, to: window.to, claimId: window.claimId };
    try {
      await options.queue.send(message);
    } catch (error) {
      sendError = error;
      break;
    }
    sent.push(message);
  }
  const confirmed = await confirmWindows(store, plan, claimEtag, sent, formatTimestamp(clock()));
  if (sent.length < plan.owned.length) {
    return { tenant, outcome: 'enqueue_failed', claimId, enqueued: sent, error: sendError };
  }
  return { tenant, outcome: confirmed ? 'enqueued' : 'confirm_failed', claimId, enqueued: sent };
}

/**
 * Removes the sent windows from the cursor and releases this run's lease on the unsent ones (so the
 * next run sends them). Idempotent by claim id, so a conflicting or unknown write is simply read
 * again and redone, after a jittered backoff, up to {@link CONFIRM_MAX_ATTEMPTS} times. False when
 * it could not be written.
 */
async function confirmWindows(
  store: KeyValueStore,
  plan: ClaimPlan,
  claimEtag: string | null,
  sent: readonly EmailWindowMessage[],
  now: string,
): Promise<boolean> {
  const sentIds = new Set(sent.map((message) => message.claimId));
  const ownedIds = new Set(plan.owned.map((window) => window.claimId));
  let known: { etag: string; state: EmailCursorState } | null =
    claimEtag === null ? null : { etag: claimEtag, state: plan.state };
  for (let attempt = 0; attempt < CONFIRM_MAX_ATTEMPTS; attempt++) {
    await casPause(attempt);
    if (known === null) {
      const current = await readEmailCursor(store);
      if (current.outcome !== 'present') return false;
      known = { etag: current.etag, state: current };
    }
    const pendingWindows = known.state.pendingWindows
      .filter((window) => !sentIds.has(window.claimId))
      .map((window) =>
        ownedIds.has(window.claimId) && window.leaseExpires === plan.leaseExpires
          ? { ...window, leaseExpires: now }
          : window,
      );
    const unchanged =
      pendingWindows.length === known.state.pendingWindows.length &&
      pendingWindows.every((window, index) => window === known?.state.pendingWindows[index]);
    if (unchanged) return true;
    const outcome = await writeEmailCursor(store, known.etag, { ...known.state, pendingWindows });
    if (outcome.result === 'won') return true;
    if (outcome.result === 'failed') return false;
    known = null;
  }
  return false;
}

export type EmailPollInitialization = 'created' | 'exists' | 'registration_failed' | 'failed' | 'unknown';

/**
 * `POST /api/poll/email-cursor/init`: registers the tenant for the timer, then creates its cursor
 * at `cursor` (an RFC 3339 timestamp, normally now), create-only. Registration comes first and is
 * idempotent, so a cursor never exists without its tenant being polled, and calling init again
 * repairs a registration that failed before. `created` is the only outcome that means "this call
 * initialised the cursor". Never throws.
 */
export async function initializeEmailPolling(
  registry: EmailPollTenantRegistry,
  store: KeyValueStore,
  tenant: string,
  cursor: string,
): Promise<{ outcome: EmailPollInitialization; error?: unknown }> {
  try {
    await registry.register(tenant);
  } catch (error) {
    return { outcome: 'registration_failed', error };
  }
  return { outcome: await initializeEmailCursor(store, cursor) };
}
