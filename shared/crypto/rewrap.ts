import { CairnError, IntegrityError, PreconditionFailedError } from '../protocol/errors';
import { forEachLimited } from '../protocol/pool';
import { casPause } from '../retry';
import type { KeyValueStore, KeyValueStoreFactory } from '../storage/keyValueStore';
import type { SealingCodec } from './encryption';
import { sealsTenant, type TenantPolicy } from './tenantPolicy';
import type { ValuePlace } from './valueCodec';

/**
 * Re-sealing stored values with the first key (the `rewrap` admin job), so that an old key can be
 * removed without losing anything. Each store that seals values offers a {@link RewrapTarget}: it
 * pages through one tenant's stored values, re-seals every value sealed with another key than the
 * first (open with any configured key, seal with the first, write back conditional on the version
 * read: a value changed meanwhile is read again), and counts per key id what it found and what is
 * left. A page is idempotent and can be run again (a value already sealed with the first key is
 * only counted), so the job is resumable.
 *
 * A value counts as one sealed value (the pending writes of a checkpoint are one per appended line).
 */

export interface RewrapCounts {
  /** Sealed values looked at. */
  examined: number;
  /** Values re-sealed with the first key. */
  resealed: number;
  /** Key id → sealed values found sealed with it (before this job re-sealed them). */
  sealedWith: Record<string, number>;
  /** Key id → values still sealed with it after this job (0 for every key once it completed). */
  remaining: Record<string, number>;
  /** `[where, message]` for values that could not be re-sealed (ids and names only). */
  errors: [string, string][];
}

export interface RewrapPage extends RewrapCounts {
  /** Pass back for the next page; null when the tenant's values of this target are done. */
  readonly next: string | null;
}

export interface RewrapTarget {
  /** `threads`, `kv`, or another store's name (e.g. `memory`). */
  readonly name: string;
  /** Re-seals up to about `limit` stored values of `tenant` from `cursor` (null: the start). */
  rewrapPage(tenant: string, cursor: string | null, limit: number): Promise<RewrapPage>;
}

export function emptyCounts(): RewrapCounts {
  return { examined: 0, resealed: 0, sealedWith: {}, remaining: {}, errors: [] };
}

/** Adds `from` into `into` (errors: at most 1,000 kept). */
export function addCounts(into: RewrapCounts, from: RewrapCounts): RewrapCounts {
  into.examined += from.examined;
  into.resealed += from.resealed;
  for (const [id, count] of Object.entries(from.sealedWith))
    into.sealedWith[id] = (into.sealedWith[id] ?? 0) + count;
  for (const [id, count] of Object.entries(from.remaining))
    into.remaining[id] = (into.remaining[id] ?? 0) + count;
  for (const error of from.errors) if (into.errors.length < 1000) into.errors.push(error);
  return into;
}

/** The id `remaining` counts bytes under when they are not sealed at all. */
export const NOT_SEALED = '(not sealed)';

/**
 * One sealed value: counts it, and re-seals it when its key is not the first. Returns the bytes to
 * store instead, or null when the value stays as it is (already first, or not openable: an error).
 */
export function resealValue(
  codec: SealingCodec,
  stored: Buffer,
  place: ValuePlace,
  counts: RewrapCounts,
): Buffer | null {
  counts.examined++;
  const id = codec.keyIdOf(stored) ?? NOT_SEALED;
  counts.sealedWith[id] = (counts.sealedWith[id] ?? 0) + 1;
  if (id === codec.firstKeyId) return null;
  try {
    const resealed = codec.seal(codec.open(stored, place), place);
    counts.resealed++;
    return resealed;
  } catch (error) {
    if (!(error instanceof IntegrityError)) throw error;
    counts.remaining[id] = (counts.remaining[id] ?? 0) + 1;
    counts.errors.push([`${place.kind} ${place.key}`, error.message]);
    return null;
  }
}

const WRITE_ATTEMPTS = 5;

/**
 * Re-seals the value at `key` of `store` with `transform` (null: nothing to write), conditional on
 * the version read; reads again after a lost race. `transform` counts into a fresh object per
 * attempt; the counts of the attempt that settled are added to `into`. Storage faults throw (the
 * job's activity is retried); a value that keeps changing is an error entry.
 */
export async function resealKey(
  store: KeyValueStore,
  key: string,
  into: RewrapCounts,
  transform: (stored: Buffer, counts: RewrapCounts) => Buffer | null,
): Promise<void> {
  for (let attempt = 0; attempt < WRITE_ATTEMPTS; attempt++) {
    await casPause(attempt);
    const stored = await store.read(key);
    if (stored === null) return;
    const counts = emptyCounts();
    const next = transform(stored.value, counts);
    if (next !== null) {
      try {
        await store.write(key, next, { ifMatch: stored.etag });
      } catch (error) {
        if (error instanceof PreconditionFailedError) continue;
        if (error instanceof CairnError && error.fault === 'caller') {
          counts.errors.push([key, error.message]);
        } else {
          throw error;
        }
      }
    }
    addCounts(into, counts);
    return;
  }
  into.errors.push([key, 'the value kept changing while it was re-sealed; run the job again']);
}

/** Key/value spaces of the tenants whose policy seals them (nothing for the others). */
export function keyValueRewrapTarget(
  raw: KeyValueStoreFactory,
  codec: SealingCodec,
  policy: TenantPolicy,
): RewrapTarget {
  return {
    name: 'kv',
    async rewrapPage(tenant, cursor, limit) {
      const counts = emptyCounts();
      if (!sealsTenant(policy, tenant)) return { ...counts, next: null };
      const store = raw.forTenant(tenant);
      const page = await store.list({ limit, ...(cursor === null ? {} : { cursor }) });
      await forEachLimited(page.keys, 8, (key) =>
        resealKey(store, key, counts, (stored, attempt) =>
          resealValue(codec, stored, { tenant, kind: 'kv', key }, attempt),
        ),
      );
      return { ...counts, next: page.cursor };
    },
  };
}
