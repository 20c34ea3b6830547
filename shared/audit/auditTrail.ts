import { createPublicKey, type KeyObject, randomBytes } from 'node:crypto';

import type { Logger } from '../logging';
import { lru } from '../lru';
import {
  type AuditRecord,
  ChainVerifier,
  type ExpectedHead,
  GENESIS_HASH,
  withHash,
} from '../protocol/audit/chain';
import { checkSignedHeads, type VerifyAnswer } from '../protocol/audit/headChain';
import { publicKeyId, type SignedHead, signHead } from '../protocol/audit/headSignature';
import { hasControlCharacter } from '../protocol/controlCharacters';
import { InternalError, StorageUnavailableError } from '../protocol/errors';
import { KeyedMutex } from '../storage/keyedMutex';
import type { AuditEvent } from './auditLog';
import type { AuditStore, RecordQuery, StoredMarker } from './auditStore';
import type { PendingEvent, PendingFate, RepairCheck, TransactionalAuditLog } from './pending';

/**
 * The audit trail (docs/audit.md): per tenant, records 1, 2, 3, … without gaps, each chained to the
 * one before by its hash, with ids, names, codes and counts only.
 *
 * Appending: a record is one create-only row per seq (`AuditStore.createRecord`): the create is
 * the linearisation point. The appender knows the head (the last record's seq, hash and event id;
 * kept per tenant in this instance once it wrote or read it, else found from the head hint), builds
 * record head+1 chained to it and creates it; a lost create (another writer, maybe on another
 * instance, took that seq) reads the record that won and tries the seq after it at once. Nothing
 * else ever writes a record, so no number is skipped: seq n+1 exists only once record n did. In this
 * instance, one tenant's appends run one at a time (no contention with itself); instances contend
 * only with each other.
 *
 * Receipts: the receipt of record n's event (event id → n) is written by n's appender right after
 * n, and again (create-only) by whoever creates n+1, in the same round trip, retried before anything
 * else should it fail; so every record but the head has one. Whether the trail holds an event is
 * thus one read (its receipt) or, for the head, a comparison: what the repair needs to append an
 * event at most once.
 *
 * Pending events and repair (see pending.ts): a marker stored before an action's commit point is
 * appended by the action's own instance within half the repair grace period of the event's making,
 * or else by a repair, which runs on a tenant's appends (at most every `repairIntervalMs` per
 * instance) and on the auditHeadSign timer, takes only markers older than the grace period, claims
 * each one (a compare-and-swap on the marker, so one repair at a time), checks whether the action
 * committed, appends the event if it did and the trail does not hold it yet, and removes the marker.
 * The grace period is several storage timeouts long, so that no appender of an event is still
 * running once a repair may append it.
 *
 * Signed heads: with a signing key, the head is signed on verify and by the timer, only when the
 * whole trail verifies and still holds the key's last signed head, which the new head names (see
 * headChain.ts); the signatures are kept (one per seq) and can be checked with the public key alone.
 */

export interface AuditTrailOptions {
  readonly store: AuditStore;
  readonly signingKey?: KeyObject;
  readonly log?: Logger;
  readonly now?: () => number;
  /**
   * After this long, an event's own appender no longer appends it and a repair may (its appender
   * gives up at half of it). Must exceed twice the longest storage call plus the clocks' skew.
   */
  readonly repairGraceMs: number;
  /** How often an instance looks for a tenant's pending markers while appending (default 10 s). */
  readonly repairIntervalMs?: number;
  /**
   * How the repair tells whether a pending event's action committed, per check kind (each domain
   * gives its own: threads, archives, memory facts, snapshots). A marker whose kind has no check
   * here stays pending (undecided).
   */
  readonly repairChecks?: readonly RepairCheck[];
}

interface Head {
  readonly seq: number;
  readonly hash: string;
  readonly eventId: string;
  /** True once the event's receipt is known to exist. */
  receipt: boolean;
}

interface TenantState {
  head: Head | undefined;
  registered: boolean;
  lastRepairMs: number;
  repairing: Promise<number> | undefined;
}

interface AppendOptions {
  /** Check first whether the trail holds the event (a stable id recorded again, or a repair). */
  readonly dedupe: boolean;
  /** No create is attempted after this time (the event is then left to a repair). */
  readonly deadlineMs?: number;
}

const GENESIS_HEAD: Head = { seq: 0, hash: GENESIS_HASH, eventId: '', receipt: true };
/** How long one append keeps trying when other writers keep taking the next seq. */
const APPEND_BUDGET_MS = 20_000;
const HINT_EVERY = 64;
const MARKERS_PER_REPAIR = 100;
const VERIFY_PAGE = 1000;
const EVENT_ID = /^[A-Za-z0-9._:~-]{1,512}$/;
const MAX_SUBJECT_CHARS = 4096;
const ACTION = /^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$/;

/** The append window of an event ran out: its marker is left to a repair. */
class AppendWindowPassed extends Error {}

export class AuditTrail implements TransactionalAuditLog {
  readonly enabled = true;
  private readonly store: AuditStore;
  private readonly now: () => number;
  private readonly graceMs: number;
  private readonly repairIntervalMs: number;
  private readonly instanceId = randomBytes(9).toString('base64url');
  private readonly states = new Map<string, TenantState>();
  private readonly queues = new KeyedMutex();
  private readonly known = lru<string, true>(100_000);
  private readonly checks = new Map<string, RepairCheck>();
  private readonly publicKey: KeyObject | undefined;
  private readonly keyId: string | undefined;
  private refusals = 0;

  constructor(private readonly options: AuditTrailOptions) {
    this.store = options.store;
    this.publicKey = options.signingKey === undefined ? undefined : createPublicKey(options.signingKey);
    this.keyId = this.publicKey === undefined ? undefined : publicKeyId(this.publicKey);
    this.now = options.now ?? Date.now;
    this.graceMs = options.repairGraceMs;
    this.repairIntervalMs = options.repairIntervalMs ?? 10_000;
    for (const check of options.repairChecks ?? []) {
      for (const kind of check.kinds) this.checks.set(kind, check);
    }
  }

  get signs(): boolean {
    return this.options.signingKey !== undefined;
  }

  // Recording.

  /** Appends `event` now (an action without a commit point of its own, or one already past it). */
  async record(event: AuditEvent): Promise<void> {
    const pending: PendingEvent = {
      ...event,
      id: event.id ?? `ev-${randomBytes(12).toString('base64url')}`,
      createdAtMs: this.now(),
    };
    checkEvent(pending);
    await this.append(event.tenant, pending, { dedupe: event.id !== undefined });
    await this.maybeRepair(event.tenant);
  }

  async begin(
    tenant: string,
    events: readonly PendingEvent[],
    check: Parameters<TransactionalAuditLog['begin']>[2],
  ) {
    for (const event of events) checkEvent(event);
    await Promise.all(events.map((event) => this.store.putMarker(tenant, event, check)));
  }

  async commit(
    tenant: string,
    events: readonly PendingEvent[],
    options: { keepMarkers?: boolean; dedupe?: boolean } = {},
  ) {
    try {
      // The events first (their window is short), then whatever pends from earlier crashes.
      for (const event of events) {
        await this.append(tenant, event, {
          dedupe: options.dedupe === true,
          deadlineMs: event.createdAtMs + this.graceMs / 2,
        });
      }
      if (options.keepMarkers !== true) {
        await Promise.all(events.map((event) => this.store.deleteMarker(tenant, event.id)));
      }
      await this.maybeRepair(tenant);
    } catch (error) {
      this.options.log?.warn(
        { err: error, tenant, events: events.map((event) => event.id) },
        'audit events stay pending: the repair appends them',
      );
    }
  }

  async abandon(tenant: string, events: readonly PendingEvent[]) {
    try {
      await Promise.all(events.map((event) => this.store.deleteMarker(tenant, event.id)));
    } catch (error) {
      this.options.log?.warn(
        { err: error, tenant },
        'audit markers of a refused action stay: the repair drops them',
      );
    }
  }

  isKnownAppended(eventId: string): boolean {
    return this.known.get(eventId) !== undefined;
  }

  async appended(tenant: string, eventId: string): Promise<boolean> {
    if (this.isKnownAppended(eventId)) return true;
    if ((await this.store.readReceipt(tenant, eventId)) !== null) {
      this.known.set(eventId, true);
      return true;
    }
    // Every record but the head has a receipt: the head is the only other place it can be.
    const head = await this.discover(tenant, this.stateOf(tenant).head);
    if (head.eventId !== eventId) return false;
    this.known.set(eventId, true);
    return true;
  }

  async settled(tenant: string, eventId: string): Promise<boolean> {
    if ((await this.store.readMarker(tenant, eventId)) === null) return true;
    if (await this.appended(tenant, eventId)) return true;
    await this.repair(tenant);
    return (await this.store.readMarker(tenant, eventId)) === null;
  }

  // Reading, verifying, signing.

  records(tenant: string, query: RecordQuery): Promise<AuditRecord[]> {
    return this.store.listRecords(tenant, query);
  }

  /**
   * Checks the whole chain, the signed heads of the signing key (see headChain.ts) and the expected
   * head. With a signing key, signs the head found only when all of that holds: the chain verifies,
   * and it still holds the key's last signed head (the new head names it, `prevSeq`/`prevHash`);
   * otherwise says why in `notSigned` and in a warning. A head already signed by the key is not
   * signed again (`signedHead` is that one).
   */
  async verify(tenant: string, expected?: ExpectedHead): Promise<VerifyAnswer> {
    return (await this.verifyAndSign(tenant, expected)).answer;
  }

  private async verifyAndSign(
    tenant: string,
    expected?: ExpectedHead,
  ): Promise<{ answer: VerifyAnswer; signed: boolean }> {
    const heads =
      this.publicKey === undefined
        ? undefined
        : checkSignedHeads(tenant, await this.allSignedHeads(tenant), this.publicKey);
    const verifier = new ChainVerifier([
      ...(heads?.expected ?? []),
      ...(expected === undefined ? [] : [expected]),
    ]);
    for (let after = 0; ;) {
      const page = await this.store.listRecords(tenant, { afterSeq: after, limit: VERIFY_PAGE });
      for (const record of page) verifier.add(record);
      if (page.length < VERIFY_PAGE) break;
      // The page's rows are seqs above `after`, so the next page starts at least a page further
      // on: a stored record whose seq was changed to an earlier one (broken, found above) must not
      // make verify read the same page again and again.
      const last = page.at(-1)?.seq;
      after =
        typeof last === 'number' && Number.isSafeInteger(last) && last > after + page.length
          ? last
          : after + page.length;
    }
    const chain = verifier.check();
    const headProblems = heads?.problems ?? [];
    const firstBroken = [chain.result.firstBroken, ...headProblems.map((problem) => problem.seq)].reduce<
      number | null
    >((first, seq) => (seq === null ? first : first === null ? seq : Math.min(first, seq)), null);
    const problems = [
      ...(chain.problem === null ? [] : [chain.problem]),
      ...headProblems.map((p) => p.message),
    ];
    const answer: VerifyAnswer = { ...chain.result, ok: firstBroken === null, firstBroken, problems };
    const [seq, hash] = answer.head;
    if (this.options.signingKey === undefined || seq === 0) return { answer, signed: false };
    if (firstBroken !== null) {
      const notSigned = `the head at seq ${seq} is not signed: ${problems.join('; ')}`;
      this.refusals++;
      this.options.log?.warn(
        { tenant, seq, firstBroken, problems, alert: 'audit_head_not_signed' },
        'audit head not signed: the trail does not verify',
      );
      return { answer: { ...answer, notSigned }, signed: false };
    }
    const latest = heads?.latest;
    if (latest !== undefined && latest.seq === seq && latest.hash === hash) {
      return { answer: { ...answer, signedHead: latest }, signed: false };
    }
    const signed = signHead(this.options.signingKey, {
      tenant,
      seq,
      hash,
      signedAtMs: this.now(),
      prevSeq: latest?.seq ?? 0,
      prevHash: latest?.hash ?? GENESIS_HASH,
    });
    await this.store.putSignedHead(signed);
    return { answer: { ...answer, signedHead: signed }, signed: true };
  }

  /** How many times this instance refused to sign a head (the chain or a signed head did not hold). */
  get headsRefused(): number {
    return this.refusals;
  }

  signedHeads(tenant: string, afterSeq: number, limit: number): Promise<SignedHead[]> {
    return this.store.listSignedHeads(tenant, afterSeq, limit);
  }

  private async allSignedHeads(tenant: string): Promise<SignedHead[]> {
    const heads: SignedHead[] = [];
    for (let after = 0; ;) {
      const page = await this.store.listSignedHeads(tenant, after, VERIFY_PAGE);
      heads.push(...page);
      if (page.length < VERIFY_PAGE) return heads;
      after = page.at(-1)?.seq ?? after;
    }
  }

  /**
   * The timer's work for every tenant with a trail: repairs its pending markers, then (with a
   * signing key) signs its head unless the key signed it already, as verify does: only when the
   * whole trail verifies and extends the key's last signed head; `refused` names the tenants whose
   * head was not signed for that reason. Safe to run twice at once: repairs claim their markers,
   * and a second signature of the same head replaces the first (both name a head that is kept).
   */
  async signHeads(): Promise<{
    tenants: number;
    signed: number;
    repaired: number;
    refused: string[];
    failed: string[];
  }> {
    let tenants = 0;
    let signed = 0;
    let repaired = 0;
    const refused: string[] = [];
    const failed: string[] = [];
    for await (const tenant of this.store.tenants()) {
      tenants++;
      try {
        repaired += await this.repair(tenant);
        if (this.options.signingKey === undefined) continue;
        const head = await this.discover(tenant, this.stateOf(tenant).head);
        if (head.seq === 0) continue;
        // Already signed by this key: nothing to do (the whole trail is read only when there is).
        // The head record is read as stored: the head this instance knows may have been rewritten.
        const [atHead] = await this.store.listSignedHeads(tenant, head.seq - 1, 1);
        if (atHead?.seq === head.seq && atHead.keyId === this.keyId) {
          const stored = await this.store.readRecord(tenant, head.seq);
          if (stored?.hash === atHead.hash) continue;
        }
        const { answer, signed: fresh } = await this.verifyAndSign(tenant);
        if (fresh) signed++;
        else if (answer.notSigned !== undefined) refused.push(tenant);
      } catch (error) {
        this.options.log?.warn({ err: error, tenant }, 'audit head not signed');
        failed.push(tenant);
      }
    }
    return { tenants, signed, repaired, refused, failed };
  }

  // Repair.

  /** Repairs the tenant's due markers unless this instance looked at them recently. */
  private async maybeRepair(tenant: string): Promise<void> {
    const state = this.stateOf(tenant);
    if (this.now() - state.lastRepairMs < this.repairIntervalMs) return;
    state.lastRepairMs = this.now();
    await this.repair(tenant);
  }

  /** Settles every marker of `tenant` older than the grace period; returns how many. */
  repair(tenant: string): Promise<number> {
    const state = this.stateOf(tenant);
    state.repairing ??= this.repairNow(tenant).finally(() => {
      state.repairing = undefined;
    });
    return state.repairing;
  }

  private async repairNow(tenant: string): Promise<number> {
    let settled = 0;
    for (const marker of await this.store.listMarkers(tenant, MARKERS_PER_REPAIR)) {
      const now = this.now();
      if (now < marker.event.createdAtMs + this.graceMs) continue;
      if (marker.claim !== undefined && marker.claim.by !== this.instanceId && now < marker.claim.untilMs)
        continue;
      const claimed = await this.store.claimMarker(tenant, marker, {
        by: this.instanceId,
        untilMs: now + this.graceMs,
      });
      if (claimed === null) continue;
      const fate = await this.fateOf(tenant, marker);
      if (fate === 'undecided') continue;
      if (fate === 'committed') {
        const deadlineMs = now + this.graceMs / 2;
        const events = [...(marker.check.carried ?? []), marker.event];
        for (const event of events) await this.append(tenant, event, { dedupe: true, deadlineMs });
      }
      // Only the version claimed: another action of the same event id (a deleter of the same
      // thread incarnation, a forget of the same fact, a publish of the same snapshot) may have
      // stored its marker since the fate was read. Its marker stays for its own commit or a later
      // repair; deleted here, a crash of that action after its commit point would lose its record.
      await this.store.deleteMarker(tenant, marker.event.id, claimed);
      this.options.log?.info(
        { tenant, event: marker.event.id, action: marker.event.action, fate },
        'audit marker repaired',
      );
      settled++;
    }
    return settled;
  }

  /** Whether the action of a marker's event committed, by the check the marker names. */
  private async fateOf(tenant: string, marker: StoredMarker): Promise<PendingFate> {
    const check = this.checks.get(marker.check.kind);
    if (check === undefined) return 'undecided';
    return check.fateOf(tenant, marker.event, marker.check, {
      appended: (of, eventId) => this.appended(of, eventId),
      readMarker: (of, eventId) => this.store.readMarker(of, eventId),
    });
  }

  // Appending.

  private stateOf(tenant: string): TenantState {
    let state = this.states.get(tenant);
    if (state === undefined) {
      state = { head: undefined, registered: false, lastRepairMs: -Infinity, repairing: undefined };
      this.states.set(tenant, state);
    }
    return state;
  }

  /** Appends one event (see the module comment); one at a time per tenant in this instance. */
  private append(tenant: string, event: PendingEvent, options: AppendOptions): Promise<void> {
    const state = this.stateOf(tenant);
    return this.queues.run(tenant, async () => {
      if (!state.registered) {
        await this.store.registerTenant(tenant);
        state.registered = true;
      }
      if (options.dedupe && (await this.appended(tenant, event.id))) return;
      const giveUpAt = this.now() + APPEND_BUDGET_MS;
      while (this.now() < giveUpAt) {
        const head = state.head ?? (state.head = await this.discover(tenant, undefined));
        if (options.deadlineMs !== undefined && this.now() > options.deadlineMs) {
          throw new AppendWindowPassed(`the append window of audit event ${event.id} has passed`);
        }
        const record = withHash({
          seq: head.seq + 1,
          atMs: this.now(),
          action: event.action,
          ...(event.actor === undefined ? {} : { actor: event.actor }),
          ...(event.threadId === undefined ? {} : { threadId: event.threadId }),
          ...(event.runId === undefined ? {} : { runId: event.runId }),
          ...(event.subject === undefined ? {} : { subject: event.subject }),
          outcome: event.outcome,
          ...(event.details === undefined ? {} : { details: event.details }),
          eventId: event.id,
          prevHash: head.hash,
        });
        // The head's receipt (usually written by its own appender already) goes in the same round
        // trip as the create; should it fail, it is written again before anything else happens.
        const [receipt, create] = await Promise.allSettled([
          this.ensureReceipt(tenant, head),
          this.store.createRecord(tenant, record),
        ]);
        if (create.status === 'rejected' || receipt.status === 'rejected') state.head = undefined;
        if (receipt.status === 'rejected') await this.ensureReceipt(tenant, head);
        // A failed create may have happened all the same: the head is found again next time.
        if (create.status === 'rejected') throw create.reason;
        const created = create.value;
        if (created) {
          const mine: Head = { seq: record.seq, hash: record.hash, eventId: event.id, receipt: false };
          state.head = mine;
          await this.ensureReceipt(tenant, mine);
          this.known.set(event.id, true);
          if (record.seq % HINT_EVERY === 0) await this.store.writeHeadHint(tenant, record.seq);
          return;
        }
        // Another writer took the seq (or this create succeeded and its answer was lost): read the
        // winner and try the seq after it at once (looking further ahead first would only let a
        // writer that keeps appending win every race).
        const winner = await this.store.readRecord(tenant, record.seq);
        if (winner === null) {
          state.head = undefined;
          continue;
        }
        const found: Head = { seq: winner.seq, hash: winner.hash, eventId: winner.eventId, receipt: false };
        state.head = found;
        if (winner.eventId === event.id) {
          await this.ensureReceipt(tenant, found);
          this.known.set(event.id, true);
          return;
        }
      }
      throw new StorageUnavailableError('the audit trail is changing too fast to append to; retry');
    });
  }

  /** Creates the head's receipt unless known to exist (create-only: another writer's is kept). */
  private async ensureReceipt(tenant: string, head: Head): Promise<void> {
    if (head.receipt) return;
    await this.store.createReceipt(tenant, head.eventId, head.seq);
    head.receipt = true;
  }

  /**
   * The trail's head: from a record known to exist (`from`, else the head hint, else the start),
   * galloping forward by doubling steps to the first absent seq, then a binary search between the
   * last present and the first absent (records are contiguous). O(log n) reads.
   */
  private async discover(tenant: string, from: Head | undefined): Promise<Head> {
    let low = from;
    if (low === undefined) {
      const hint = await this.store.readHeadHint(tenant);
      const record = hint === null || hint < 1 ? null : await this.store.readRecord(tenant, hint);
      low = record === null ? GENESIS_HEAD : headOf(record);
    }
    let high: number | undefined;
    for (let step = 1; high === undefined; step *= 2) {
      const record = await this.store.readRecord(tenant, low.seq + step);
      if (record === null) high = low.seq + step;
      else low = headOf(record);
    }
    while (high - low.seq > 1) {
      const middle = Math.floor((low.seq + high) / 2);
      const record = await this.store.readRecord(tenant, middle);
      if (record === null) high = middle;
      else low = headOf(record);
    }
    return { ...low };
  }
}

function headOf(record: AuditRecord): Head {
  return { seq: record.seq, hash: record.hash, eventId: record.eventId, receipt: false };
}

/** Events hold ids, names, codes and counts: anything else is a bug of the caller. */
function checkEvent(event: PendingEvent): void {
  const problem = eventProblem(event);
  if (problem !== null) throw new InternalError(`audit event ${event.action}: ${problem}`);
}

function eventProblem(event: PendingEvent): string | null {
  if (!EVENT_ID.test(event.id)) return 'the id must be 1-512 of [A-Za-z0-9._:~-]';
  if (!ACTION.test(event.action)) return 'the action must be <area>.<verb> in lowercase';
  for (const [name, value] of Object.entries({
    tenant: event.tenant,
    actor: event.actor,
    threadId: event.threadId,
    runId: event.runId,
    subject: event.subject,
    outcome: event.outcome,
  })) {
    if (value === undefined) continue;
    // A subject may name two names of up to 512 bytes each (a memory fact's namespace and key,
    // as a JSON pair); every other field is an id.
    const max = name === 'subject' ? MAX_SUBJECT_CHARS : 1024;
    if (value.length === 0 || value.length > max || hasControlCharacter(value))
      return `${name} must be 1-${max} characters`;
  }
  const details = Object.entries(event.details ?? {});
  if (details.length > 32) return 'at most 32 details';
  for (const [name, value] of details) {
    if (typeof value === 'string' && value.length > 256)
      return `details.${name} is longer than 256 characters`;
    if (typeof value === 'number' && !Number.isFinite(value)) return `details.${name} is not a finite number`;
  }
  return null;
}
