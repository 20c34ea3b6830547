import type { SealingCodec } from '../crypto/encryption';
import {
  addCounts,
  emptyCounts,
  NOT_SEALED,
  resealValue,
  type RewrapCounts,
  type RewrapTarget,
} from '../crypto/rewrap';
import { sealsTenant, type TenantPolicy } from '../crypto/tenantPolicy';
import { IntegrityError } from '../protocol/errors';
import { forEachLimited } from '../protocol/pool';
import type { RewritableObjectStore } from '../storage/immutableObjectStore';
import type { SessionIndex } from '../storage/sessionIndex';
import {
  ARCHIVE_OBJECT_KIND,
  indexDataPlace,
  sealedDataOf,
  type SealedSessions,
  withSealedData,
} from './sealedArchive';

/**
 * The `rewrap` job's target for sealed session archives (sealedArchive.ts): for each session of
 * the registry of the tenant's sealed sessions, every object (blocks, tails, manifests) sealed with
 * another key than the first is re-sealed in place by {@link RewritableObjectStore.rewrite}: the
 * same content, so a reader gets the old bytes or the new ones and either opens to the same; a
 * session deleted meanwhile stays deleted. The index record's sealed `data` is re-sealed by the
 * index's compare-and-swap. A page covers up to `limit` objects and sessions; its cursor names the
 * session and the last object done, so the job resumes inside a large session (whose objects are
 * listed from its start again: the object store lists by prefix only).
 */

interface Position {
  /** The registry's cursor after the current session (null: it is the last one). */
  readonly list: string | null;
  /** The current session; null: take the next one from `list`. */
  readonly session: string | null;
  /** The last object key (within the store) done in the current session. */
  readonly after: string;
}

const START: Position = { list: null, session: null, after: '' };

export interface ArchiveRewrapStores {
  /** The archive's objects as stored (sealed bytes), taking sealed objects of the plain limit. */
  readonly objects: RewritableObjectStore;
  /** The session index as stored (sealed `data`). */
  readonly index: SessionIndex;
  readonly sessions: SealedSessions;
}

export function archiveRewrapTarget(
  stores: ArchiveRewrapStores,
  codec: SealingCodec,
  policy: TenantPolicy,
): RewrapTarget {
  const { objects, index, sessions } = stores;

  async function resealIndexRecord(tenant: string, sessionId: string, into: RewrapCounts): Promise<void> {
    let settled = emptyCounts();
    await index.update(tenant, sessionId, async (current) => {
      settled = emptyCounts();
      if (current === null || current.data === null) return null;
      const place = indexDataPlace(tenant, current);
      let stored: Buffer;
      try {
        stored = sealedDataOf(current);
      } catch (error) {
        if (!(error instanceof IntegrityError)) throw error;
        // Plain where sealed is expected: counted as left under no key, reported.
        settled.examined++;
        settled.remaining[NOT_SEALED] = (settled.remaining[NOT_SEALED] ?? 0) + 1;
        settled.errors.push([`${place.kind} ${sessionId}`, error.message]);
        return null;
      }
      const resealed = resealValue(codec, stored, place, settled);
      return resealed === null ? null : withSealedData(current, resealed);
    });
    addCounts(into, settled);
  }

  async function resealObject(tenant: string, key: string, into: RewrapCounts): Promise<void> {
    let settled = emptyCounts();
    const outcome = await objects.rewrite(key, (stored) => {
      settled = emptyCounts();
      return resealValue(codec, stored, { tenant, kind: ARCHIVE_OBJECT_KIND, key }, settled);
    });
    // Deleted meanwhile: nothing of it is left to count.
    if (outcome !== 'absent') addCounts(into, settled);
  }

  return {
    name: 'archive',
    async rewrapPage(tenant, cursor, limit) {
      const counts = emptyCounts();
      if (!sealsTenant(policy, tenant)) return { ...counts, next: null };
      let position = cursor === null ? START : (JSON.parse(cursor) as Position);
      // Objects and sessions both count against the page, so that a page of many empty (or
      // deleted) sessions ends as soon as one of many objects.
      let left = limit;
      while (left > 0) {
        if (position.session === null) {
          const page = await sessions.page(tenant, 1, position.list);
          const sessionId = page.ids[0];
          if (sessionId === undefined) return { ...counts, next: null };
          await resealIndexRecord(tenant, sessionId, counts);
          position = { list: page.cursor, session: sessionId, after: '' };
          left--;
          if (left === 0) break;
        }
        const { session } = position;
        const latest = `${session}/latest`;
        const keys: string[] = [];
        let more = false;
        for await (const item of objects.list(`${session}/`)) {
          if (item.key <= position.after || item.key === latest) continue;
          if (keys.length === left) {
            more = true;
            break;
          }
          keys.push(item.key);
        }
        await forEachLimited(keys, 8, (key) => resealObject(tenant, key, counts));
        left -= keys.length;
        if (more) {
          position = { ...position, after: keys.at(-1) ?? position.after };
        } else if (position.list === null) {
          return { ...counts, next: null };
        } else {
          position = { list: position.list, session: null, after: '' };
        }
      }
      return { ...counts, next: JSON.stringify(position) };
    },
  };
}
