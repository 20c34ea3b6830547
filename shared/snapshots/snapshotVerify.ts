import { createHash } from 'node:crypto';

import { forEachLimited } from '../protocol/pool';
import { MANIFEST_FILE, partCount, partSize } from '../protocol/snapshots/identifiers';
import type { VerifyPart } from '../retention/parts';
import { type HashSample, sampled, type VerifyCollector } from '../retention/verifyReport';
import type { ImmutableObjectStore } from '../storage/immutableObjectStore';
import { readSnapshots, unreferencedSnapshotObjects } from './snapshotRetention';

/**
 * `cairn verify` for one tenant's workspace snapshots: every workspace's `latest` names a stored
 * manifest, every manifest has its signature, every part its files need is stored with its size,
 * files hash to their SHA-256 (a sample, or every file with `readData`), and what nothing
 * references is reported as an orphan.
 */

const READ_CONCURRENCY = 8;

export async function verifySnapshots(
  store: ImmutableObjectStore,
  collector: VerifyCollector,
  sample: HashSample,
): Promise<void> {
  const contents = await readSnapshots(store);
  for (const [workspaceId, id] of contents.latest) {
    const key = `workspaces/${workspaceId}/snapshots/${id}/${MANIFEST_FILE}`;
    if (!contents.manifests.has(key)) {
      collector.finding({
        domain: 'snapshots',
        kind: 'dangling_latest',
        where: `workspace ${workspaceId}`,
        key: `workspaces/${workspaceId}/latest`,
        detail: `latest names snapshot ${id}, which is not stored`,
      });
    }
  }
  for (const [key, files] of contents.manifests) {
    const folder = key.slice(0, -MANIFEST_FILE.length);
    const where = `snapshot ${key.split('/')[3] ?? ''} of workspace ${key.split('/')[1] ?? ''}`;
    if (files === null) {
      collector.finding({
        domain: 'snapshots',
        kind: 'unreadable',
        where,
        key,
        detail: 'the manifest is not readable',
      });
      continue;
    }
    collector.checked.snapshots += 1;
    if (!contents.objects.has(`${folder}manifest.sig`)) {
      collector.finding({
        domain: 'snapshots',
        kind: 'missing',
        where,
        key: `${folder}manifest.sig`,
        detail: 'the signature of the manifest is not stored',
      });
    }
    const whole: [string, number][] = [];
    for (const [sha256, size] of files) {
      let complete = true;
      for (let part = 0; part < partCount(size); part++) {
        const partKey = `objects/${sha256}/${part}`;
        const expected = partSize(size, part);
        const stored = contents.objects.get(partKey);
        collector.checked.parts += 1;
        if (stored === undefined || stored.size !== expected) {
          complete = false;
          collector.finding({
            domain: 'snapshots',
            kind: stored === undefined ? 'missing' : 'wrong_size',
            where,
            key: partKey,
            detail:
              stored === undefined
                ? 'a file of the snapshot needs this part; it is not stored'
                : `the part should hold ${expected} bytes; ${stored.size} are stored`,
          });
        }
      }
      if (complete) whole.push([sha256, size]);
    }
    await forEachLimited(sampled(whole, sample), READ_CONCURRENCY, async ([sha256, size]) => {
      const hash = createHash('sha256');
      for (let part = 0; part < partCount(size); part++) {
        const bytes = await store.get(`objects/${sha256}/${part}`);
        if (bytes === null) return;
        hash.update(bytes);
      }
      collector.hashed(size);
      if (hash.digest('hex') !== sha256) {
        collector.finding({
          domain: 'snapshots',
          kind: 'wrong_hash',
          where,
          key: `objects/${sha256}/`,
          detail: `the parts of file ${sha256} do not hash to it`,
        });
      }
    });
  }
  for (const item of unreferencedSnapshotObjects(contents)) {
    collector.orphan('snapshots', item.key, item.size, item.storedAt);
  }
}

/** The snapshots' part of `cairn verify`, for tenants that store snapshots. */
export function snapshotVerifyPart(stores: { forTenant(tenant: string): ImmutableObjectStore }): VerifyPart {
  return {
    name: 'snapshots',
    verify: async (tenant, domains, collector, sample) => {
      if (domains.has('snapshots')) await verifySnapshots(stores.forTenant(tenant), collector, sample);
    },
  };
}
