import type { TransactionalAuditLog } from '../audit/pending';
import type { KeyValueStore } from '../storage/keyValueStore';
import type { PendingWrite } from './pendingWrites';
import type { ChannelVersion, TypedBytes } from './records';

/** The thread store's options and the shapes it takes and answers (see threadStore.ts). */

/** What the store takes, with the checks of validation.ts. */
export type { CheckpointPut, WritesPut } from './validation';

export type OnBusy = 'reject' | 'wait' | 'interrupt';

export interface ThreadStoreOptions {
  /** The tenant's thread space; cheap, no I/O (a factory's `forSpace('threads', tenant)`). */
  readonly storeOf: (tenant: string) => KeyValueStore;
  /**
   * The largest value the thread store writes, in bytes (a channel value must fit with its type
   * tag): the storage's limit less the seal's overhead when sealed (`threadValueLimit`).
   */
  readonly maxValueBytes: number;
  /**
   * True when `storeOf` seals values at rest: a value's key then carries 16 random bytes instead of
   * a digest of its content (a digest of the plaintext would let anyone who can list the storage
   * confirm a guessed value).
   */
  readonly sealed?: boolean;
  /**
   * The audit trail: run starts, finishes and interruptions, rewinds and deletions are recorded
   * (see shared/audit/pending.ts for how a record and its change never disagree). Default: off.
   */
  readonly audit?: TransactionalAuditLog;
  readonly now?: () => number;
  /** How long a put's commit retries lost compare-and-swaps; tests shorten it. Default 10 s. */
  readonly commitBudgetMs?: number;
}

export interface PutResult {
  /** False when the checkpoint was already stored with this content (a retry). */
  readonly created: boolean;
  readonly threadId: string;
  readonly ns: string;
  readonly checkpointId: string;
  /** The namespace's head after the put (this checkpoint, unless a retry found the head moved on). */
  readonly head: string;
}

export interface CheckpointTuple {
  readonly threadId: string;
  readonly ns: string;
  readonly checkpointId: string;
  readonly parent: string | null;
  readonly createdAt: string;
  readonly v: number;
  readonly checkpoint: TypedBytes;
  readonly metadata: Record<string, unknown>;
  readonly channelVersions: Record<string, ChannelVersion>;
  /** Channel → value, for every channel that has one at this checkpoint. */
  readonly values: Record<string, TypedBytes>;
  /** Merged, in (task path, task id, index) order. */
  readonly pendingWrites: PendingWrite[];
  /** For a checkpoint of format below 4 with a parent: the parent's writes to `__pregel_tasks`. */
  readonly pendingSends?: TypedBytes[];
  readonly runId?: string;
}

export interface HistoryQuery {
  /** One namespace; undefined: every namespace. */
  readonly ns?: string;
  /** Only checkpoints with a smaller id (LangGraph's `before`). */
  readonly before?: string;
  /** A `next` of an earlier page; instead of `before`. */
  readonly cursor?: string;
  /** 1-100. */
  readonly limit: number;
  /** Top-level metadata keys that must equal these JSON values. */
  readonly filter?: Readonly<Record<string, unknown>>;
}

export interface HistoryPage {
  readonly checkpoints: CheckpointTuple[];
  /** Pass as `cursor` for the next page; null when no older checkpoint is left. */
  readonly next: string | null;
}

export interface ThreadListQuery {
  readonly prefix?: string;
  readonly after?: string;
  readonly cursor?: string;
  /** 1-1000. */
  readonly limit: number;
}

export interface RunStart {
  readonly onBusy: OnBusy;
  /** How long `wait` waits for the thread, 0-60 s. */
  readonly busyTimeoutMs: number;
  readonly leaseMs: number;
}

/** LangGraph's channel of pending sends (`TASKS`), read for checkpoints of format below 4. */
export const SENDS_CHANNEL = '__pregel_tasks';
