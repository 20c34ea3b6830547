import { IntegrityError, PreconditionFailedError, StorageUnavailableError } from '../protocol/errors';
import { LOST_RACE, retryCompareAndSwap } from '../retry';
import type { KeyValueStore, KeyValueStoreFactory } from '../storage/keyValueStore';
import { SYSTEM_NAMESPACE } from '../tenants/systemNamespace';

/**
 * What prune remembers of each tenant between runs (`retention/state/<tenant>`, JSON, in the system
 * namespace): when its last complete pass started (so that the next run skips threads unchanged
 * since), where an unfinished pass stopped, and the deletions under way. Every change is a
 * compare-and-swap on the ETag, merged and retried: overlapping runs never lose one another's
 * intents. Losing a cursor or a completion time only costs work, never correctness.
 */

/** A thread whose record prune deleted; its data (one incarnation) may remain. */
export interface ThreadIntent {
  readonly threadId: string;
  readonly incarnation: string;
  /** When the intent was written (RFC 3339): one whose thread still exists long after is dropped. */
  readonly at: string;
}

/** A session prune is deleting: its `latest` is a tombstone or gone, its objects may remain. */
export interface SessionIntent {
  readonly sessionId: string;
  readonly at: string;
}

export interface PruneState {
  readonly v: 1;
  /** When the last pass over every thread (complete, not cut by the budget) started. */
  readonly threadsPassStartedAt: string | null;
  /** When the last full pass (every thread, session and snapshot, changed or not) started. */
  readonly fullPassStartedAt: string | null;
  /** An unfinished thread pass: the last thread it finished, when it started, whether it is full. */
  readonly threadsCursor: {
    readonly after: string;
    readonly startedAt: string;
    readonly full: boolean;
  } | null;
  /** The UTC day (YYYY-MM-DD) the interaction log was last pruned. */
  readonly interactionsPrunedOn: string | null;
  readonly threadIntents: readonly ThreadIntent[];
  readonly sessionIntents: readonly SessionIntent[];
}

export const EMPTY_STATE: PruneState = {
  v: 1,
  threadsPassStartedAt: null,
  fullPassStartedAt: null,
  threadsCursor: null,
  interactionsPrunedOn: null,
  threadIntents: [],
  sessionIntents: [],
};

const PREFIX = 'retention/state/';
const ATTEMPTS = 24;

export class PruneStates {
  private readonly store: KeyValueStore;

  constructor(kvStores: KeyValueStoreFactory) {
    this.store = kvStores.forTenant(SYSTEM_NAMESPACE);
  }

  async read(tenant: string): Promise<PruneState> {
    return (await this.readVersion(tenant)).state;
  }

  /**
   * Applies `change` to the current state and writes it on that version, again from a fresh read
   * when another run wrote in between (jittered), so that concurrent changes all land. `change`
   * returns null to write nothing. Throws StorageUnavailableError when it keeps losing.
   */
  async update(tenant: string, change: (current: PruneState) => PruneState | null): Promise<PruneState> {
    const outcome = await retryCompareAndSwap(ATTEMPTS, async () => {
      const { state, etag } = await this.readVersion(tenant);
      const next = change(state);
      if (next === null) return state;
      try {
        await this.store.write(
          PREFIX + tenant,
          Buffer.from(JSON.stringify(next)),
          etag === null ? { ifAbsent: true } : { ifMatch: etag },
        );
        return next;
      } catch (error) {
        if (!(error instanceof PreconditionFailedError)) throw error;
        return LOST_RACE;
      }
    });
    if (outcome !== LOST_RACE) return outcome;
    throw new StorageUnavailableError(`the prune state of tenant ${tenant} is changing too fast; retry`);
  }

  private async readVersion(tenant: string): Promise<{ state: PruneState; etag: string | null }> {
    const stored = await this.store.read(PREFIX + tenant);
    if (stored === null) return { state: EMPTY_STATE, etag: null };
    try {
      const state = JSON.parse(stored.value.toString('utf8')) as PruneState;
      if (state.v !== 1) throw new Error(`unknown version ${String(state.v)}`);
      return { state: { ...EMPTY_STATE, ...state }, etag: stored.etag };
    } catch (error) {
      throw new IntegrityError(`the prune state of tenant ${tenant} is not readable`, {}, { cause: error });
    }
  }
}

/** `intents` with `added` (each thread's incarnation once). */
export function withThreadIntents(state: PruneState, added: readonly ThreadIntent[]): PruneState | null {
  const known = new Set(state.threadIntents.map(intentKey));
  const fresh = added.filter((intent) => !known.has(intentKey(intent)));
  if (fresh.length === 0) return null;
  return { ...state, threadIntents: [...state.threadIntents, ...fresh] };
}

export function withoutThreadIntents(
  state: PruneState,
  removed: readonly { threadId: string; incarnation: string }[],
): PruneState | null {
  const gone = new Set(removed.map(intentKey));
  const kept = state.threadIntents.filter((intent) => !gone.has(intentKey(intent)));
  return kept.length === state.threadIntents.length ? null : { ...state, threadIntents: kept };
}

export function withSessionIntent(state: PruneState, sessionId: string, at: string): PruneState | null {
  if (state.sessionIntents.some((intent) => intent.sessionId === sessionId)) return null;
  return { ...state, sessionIntents: [...state.sessionIntents, { sessionId, at }] };
}

export function withoutSessionIntent(state: PruneState, sessionId: string): PruneState | null {
  const kept = state.sessionIntents.filter((intent) => intent.sessionId !== sessionId);
  return kept.length === state.sessionIntents.length ? null : { ...state, sessionIntents: kept };
}

function intentKey(intent: { threadId: string; incarnation: string }): string {
  return `${intent.threadId}/${intent.incarnation}`;
}
