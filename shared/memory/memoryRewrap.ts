import type { SealingCodec } from '../crypto/encryption';
import { addCounts, emptyCounts, resealValue, type RewrapCounts, type RewrapTarget } from '../crypto/rewrap';
import { CairnError, PreconditionFailedError } from '../protocol/errors';
import { forEachLimited } from '../protocol/pool';
import { casPause } from '../retry';
import { placeOf } from './memory';
import type { MemoryStore, StoredFact } from './memoryStore';

/**
 * The `rewrap` job's target for memory facts (see shared/crypto/rewrap.ts): it pages through every
 * row of a tenant, expired ones included (their bytes are sealed values too), in the store's scan
 * order, and re-seals each value sealed with another key than the first. The row is written back
 * whole (times, incarnation and audit outbox as read, so the fact and its audit proof are unchanged)
 * and only over the version read: a fact written or forgotten meanwhile is read again (and, if gone,
 * skipped), so a writer never loses a write to the job and nothing is counted twice (the counts of
 * the attempt that settled are the ones added). The cursor is the store's scan cursor, so a page
 * runs again from where the job stopped.
 */

const WRITE_ATTEMPTS = 5;

export function memoryRewrapTarget(
  store: MemoryStore,
  codec: SealingCodec,
  /** Deletes the tenant's search snapshots (a cache, sealed as a whole: dropped, not re-sealed). */
  dropSnapshots: (tenant: string) => Promise<void> = async () => {},
): RewrapTarget {
  return {
    name: 'memory',
    async rewrapPage(tenant, cursor, limit) {
      const counts = emptyCounts();
      // Before the first page and after the last: none sealed with an old key outlives the job.
      if (cursor === null) await dropSnapshots(tenant);
      const page = await store.scan(tenant, '', { pageSize: limit, ...(cursor === null ? {} : { cursor }) });
      await forEachLimited(page.facts, 8, (fact) => resealFact(store, codec, tenant, fact, counts));
      if (page.cursor === null) await dropSnapshots(tenant);
      return { ...counts, next: page.cursor };
    },
  };
}

async function resealFact(
  store: MemoryStore,
  codec: SealingCodec,
  tenant: string,
  listed: StoredFact,
  into: RewrapCounts,
): Promise<void> {
  const place = placeOf(tenant, listed.namespace, listed.key);
  let fact: StoredFact | null = listed;
  for (let attempt = 0; attempt < WRITE_ATTEMPTS; attempt++) {
    if (attempt > 0) {
      await casPause(attempt);
      fact = await store.get(tenant, listed.namespace, listed.key);
    }
    if (fact === null) return;
    const counts = emptyCounts();
    const resealed = resealValue(codec, fact.value, place, counts);
    if (resealed !== null) {
      const { etag, ...row } = fact;
      try {
        await store.write(tenant, { ...row, value: resealed }, etag);
      } catch (error) {
        if (error instanceof PreconditionFailedError) continue;
        if (error instanceof CairnError && error.fault === 'caller') {
          counts.errors.push([`memory.fact ${place.key}`, error.message]);
        } else {
          throw error;
        }
      }
    }
    addCounts(into, counts);
    return;
  }
  into.errors.push([
    `memory.fact ${place.key}`,
    'the fact kept changing while it was re-sealed; run the job again',
  ]);
}
