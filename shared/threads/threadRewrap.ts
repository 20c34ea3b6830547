import type { SealingCodec } from '../crypto/encryption';
import { emptyCounts, resealKey, resealValue, type RewrapCounts, type RewrapTarget } from '../crypto/rewrap';
import type { ValuePlace } from '../crypto/valueCodec';
import { forEachLimited } from '../protocol/pool';
import type { KeyValueStoreFactory } from '../storage/keyValueStore';
import { kindOfThreadKey } from './sealedThreadSpace';

/**
 * The `rewrap` job's target for thread spaces: every thread record, checkpoint record and channel
 * value, and every line of pending writes, sealed with another key than the first, is re-sealed
 * with the first (see shared/crypto/rewrap.ts). Writes are conditional on the version read, so a
 * thread that changes meanwhile loses nothing: its record is read again, and a concurrent append of
 * pending writes makes the re-sealed copy lose its compare-and-swap and be redone.
 */
export function threadRewrapTarget(raw: KeyValueStoreFactory, codec: SealingCodec): RewrapTarget {
  return {
    name: 'threads',
    async rewrapPage(tenant, cursor, limit) {
      const store = raw.forSpace('threads', tenant);
      const counts = emptyCounts();
      const page = await store.list({ limit, ...(cursor === null ? {} : { cursor }) });
      await forEachLimited(page.keys, 8, async (key) => {
        const kind = kindOfThreadKey(key);
        if (kind === null || kind === 'thread.mark') return;
        const place: ValuePlace = { tenant, kind, key };
        await resealKey(store, key, counts, (stored, attempt) =>
          kind === 'thread.writes'
            ? resealLines(codec, stored, place, attempt)
            : resealValue(codec, stored, place, attempt),
        );
      });
      return { ...counts, next: page.cursor };
    },
  };
}

/** Pending writes: each stored line is a sealed value (base64); null when none changes. */
function resealLines(
  codec: SealingCodec,
  stored: Buffer,
  place: ValuePlace,
  counts: RewrapCounts,
): Buffer | null {
  let changed = false;
  const lines = stored
    .toString('latin1')
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => {
      const resealed = resealValue(codec, Buffer.from(line, 'base64'), place, counts);
      if (resealed === null) return line;
      changed = true;
      return resealed.toString('base64');
    });
  return changed ? Buffer.from(lines.map((line) => `${line}\n`).join(''), 'latin1') : null;
}
