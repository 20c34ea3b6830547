import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';

import { describe, expect, it } from 'vitest';

import type { PendingEvent } from '../../shared/audit/pending';
import type { ValueCodec, ValuePlace } from '../../shared/crypto/valueCodec';
import { bm25Scores, documentTerms, queryWords, words } from '../../shared/memory/keywordSearch';
import { MemoryFacts } from '../../shared/memory/memory';
import type { MemorySnapshotStore } from '../../shared/memory/searchSnapshot';
import { IntegrityError, StorageUnavailableError } from '../../shared/protocol/errors';
import { LocalMemoryStore } from '../../shared/storage/local/localMemoryStore';
import { tempDir } from '../support/cleanup';
import { recordingAudit } from '../support/recordingAudit';

/**
 * The seams of memory facts: every value goes through the codec bound to its place, and every
 * change reaches the audit log with ids and counts only. Plus the keyword scoring on its own.
 */

/** A codec that scrambles bytes and binds them to their place, as an encrypting codec must. */
function bindingCodec(): ValueCodec & { places: ValuePlace[] } {
  const places: ValuePlace[] = [];
  const tag = (place: ValuePlace) =>
    JSON.stringify([place.tenant, place.kind, place.key, place.version ?? null]);
  const scramble = (bytes: Buffer) => Buffer.from(bytes.map((byte) => byte ^ 0x5a));
  return {
    encrypts: true,
    places,
    seal(plain, place) {
      places.push(place);
      const header = Buffer.from(tag(place));
      return Buffer.concat([Buffer.from([header.length >> 8, header.length & 255]), header, scramble(plain)]);
    },
    open(stored, place) {
      const length = ((stored[0] ?? 0) << 8) | (stored[1] ?? 0);
      if (stored.subarray(2, 2 + length).toString() !== tag(place)) {
        throw new IntegrityError('the value does not belong here');
      }
      return scramble(stored.subarray(2 + length));
    },
  };
}

function filesUnder(folder: string): string[] {
  return readdirSync(folder).flatMap((name) => {
    const full = path.join(folder, name);
    return statSync(full).isDirectory() ? filesUnder(full) : [full];
  });
}

describe('memory facts and the codec', () => {
  it('seals every value to its place; bytes moved to another fact or tenant fail to open', async () => {
    const dir = tempDir('memory-codec');
    const store = new LocalMemoryStore(dir);
    const codec = bindingCodec();
    const memory = new MemoryFacts({ store, codec });
    const caller = { tenant: 'tenant-a' };
    await memory.remember(caller, 'users/42', 'secret', { text: 'plaintext-marker' });
    expect(codec.places).toEqual([
      { tenant: 'tenant-a', kind: 'memory.fact', key: JSON.stringify(['users/42', 'secret']) },
    ]);
    expect((await memory.recall(caller, 'users/42', 'secret'))?.value).toEqual({ text: 'plaintext-marker' });
    for (const file of filesUnder(path.join(dir, 'memory'))) {
      const stored = readFileSync(file);
      expect(stored.includes('plaintext-marker')).toBe(false);
      const { value } = JSON.parse(stored.toString()) as { value: string };
      expect(Buffer.from(value, 'base64').includes('plaintext-marker')).toBe(false);
    }

    // The sealed row copied under another key, and into another tenant: never served.
    const row = await store.get('tenant-a', 'users/42', 'secret');
    if (row === null) throw new Error('the fact is missing');
    await store.write('tenant-a', { ...row, key: 'copy' }, null);
    await store.write('tenant-b', row, null);
    await expect(memory.recall(caller, 'users/42', 'copy')).rejects.toBeInstanceOf(IntegrityError);
    await expect(memory.recall({ tenant: 'tenant-b' }, 'users/42', 'secret')).rejects.toBeInstanceOf(
      IntegrityError,
    );
    await expect(memory.search(caller, { namespace: 'users', text: 'marker' })).rejects.toBeInstanceOf(
      IntegrityError,
    );
  });
});

describe('memory facts and the audit log', () => {
  const shape = (event: PendingEvent) => ({
    action: event.action,
    actor: event.actor,
    subject: event.subject,
    details: event.details,
  });

  it('records writes, forgets and a forget of a namespace (one record with its count), names only, never values', async () => {
    const audit = recordingAudit();
    const store = new LocalMemoryStore(tempDir('memory-audit'));
    const memory = new MemoryFacts({ store, audit: audit.log });
    const caller = { tenant: 'tenant-a', actor: 'key-1' };
    await memory.remember(caller, 'users/42', 'language', 'value-marker-1');
    await memory.remember(caller, 'users/42', 'language', 'value-marker-2');
    await memory.remember(caller, 'users/43', 'language', 'value-marker-3');
    await memory.remember(caller, 'users/43', 'a/b', 'value-marker-4');
    expect(await memory.forget(caller, 'users/42', 'language')).toBe(true);
    expect(await memory.forget(caller, 'users/42', 'language')).toBe(false);
    expect(await memory.forgetAll(caller, 'users')).toEqual({ deleted: 2, more: false });
    expect(await memory.forgetAll(caller, 'users')).toEqual({ deleted: 0, more: false });
    expect(audit.committed.map(shape)).toEqual([
      {
        action: 'memory.written',
        actor: 'key-1',
        subject: '["users/42","language"]',
        details: { created: true },
      },
      {
        action: 'memory.written',
        actor: 'key-1',
        subject: '["users/42","language"]',
        details: { created: false },
      },
      {
        action: 'memory.written',
        actor: 'key-1',
        subject: '["users/43","language"]',
        details: { created: true },
      },
      { action: 'memory.written', actor: 'key-1', subject: '["users/43","a/b"]', details: { created: true } },
      { action: 'memory.forgotten', actor: 'key-1', subject: '["users/42","language"]', details: undefined },
      {
        action: 'memory.forgotten',
        actor: 'key-1',
        subject: '["users"]',
        details: { count: 2, more: false },
      },
    ]);
    // Each change: its marker before the storage commit, its record after, no marker left.
    expect(audit.calls).toEqual([
      ...Array.from({ length: 4 }, () => ['begin memory.written memory', 'commit memory.written']).flat(),
      'begin memory.forgotten memory-forget',
      'commit memory.forgotten',
      'begin memory.forgotten memory-forget',
      'commit memory.forgotten',
    ]);
    expect(audit.markers.size).toBe(0);
    expect(JSON.stringify([...audit.committed, ...audit.calls])).not.toContain('value-marker');
  });

  it('carries the event in the row until it is known to be in the trail; a write refused by its compare-and-swap abandons its marker', async () => {
    const audit = recordingAudit();
    const store = new LocalMemoryStore(tempDir('memory-outbox'));
    const caller = { tenant: 'tenant-a' };
    const one = new MemoryFacts({ store, audit: audit.log });
    const first = await one.remember(caller, 'ns', 'k', 1);
    const row = await store.get('tenant-a', 'ns', 'k');
    const [written] = audit.committed;
    expect(JSON.parse(row?.outbox ?? '[]')).toEqual([written]);
    // The next write drops the event it knows to be appended and carries its own.
    await one.remember(caller, 'ns', 'k', 2);
    const after = JSON.parse((await store.get('tenant-a', 'ns', 'k'))?.outbox ?? '[]') as PendingEvent[];
    expect(after.map((event) => event.id)).toEqual([audit.committed[1]?.id]);
    expect((await store.get('tenant-a', 'ns', 'k'))?.incarnation).toBe(row?.incarnation);

    // Another instance wrote meanwhile: this one's known version is stale, its first write loses.
    await new MemoryFacts({ store, audit: audit.log }).remember(caller, 'ns', 'k', 3);
    audit.calls.length = 0;
    await one.remember(caller, 'ns', 'k', 4, { conditions: {} });
    expect(audit.calls).toEqual([
      'begin memory.written memory',
      'abandon memory.written',
      'begin memory.written memory',
      'commit memory.written',
    ]);
    expect(audit.markers.size).toBe(0);
    expect(first.created).toBe(true);

    // Forgotten and remembered again: a new incarnation.
    await one.forget(caller, 'ns', 'k');
    await one.remember(caller, 'ns', 'k', 5);
    expect((await store.get('tenant-a', 'ns', 'k'))?.incarnation).not.toBe(row?.incarnation);
  });

  it('does not call a log that is off, and keeps no outbox', async () => {
    const audit = recordingAudit(false);
    const store = new LocalMemoryStore(tempDir('memory-audit-off'));
    const memory = new MemoryFacts({ store, audit: audit.log });
    await memory.remember({ tenant: 't' }, 'a', 'k', 1);
    await memory.forget({ tenant: 't' }, 'a', 'k');
    await memory.remember({ tenant: 't' }, 'a', 'k', 1);
    expect((await store.get('t', 'a', 'k'))?.outbox).toBeNull();
    expect(await memory.forgetAll({ tenant: 't' }, 'a')).toEqual({ deleted: 1, more: false });
    expect(audit.calls).toEqual([]);
  });
});

describe('memory facts and the search snapshots', () => {
  it('a prune deletes expired facts when the snapshot store fails, and still reports the failure', async () => {
    const store = new LocalMemoryStore(tempDir('memory-prune-snapshots'));
    const down = (): Promise<never> => Promise.reject(new StorageUnavailableError('snapshots are down'));
    const snapshots: MemorySnapshotStore = { read: down, write: down, delete: down, list: down };
    let now = 1_000_000;
    const memory = new MemoryFacts({ store, snapshots, now: () => now });
    await memory.remember({ tenant: 'prune-t' }, 'n', 'gone', { a: 1 }, { ttl: 1 });
    await memory.remember({ tenant: 'prune-t' }, 'n', 'kept', { a: 2 });
    now += 10_000;

    await expect(memory.pruneExpired('prune-t', 10)).rejects.toBeInstanceOf(StorageUnavailableError);
    // The expired row is gone from storage itself, not only hidden from reads.
    expect(await store.pruneExpired('prune-t', { now, budget: 10 })).toEqual({ deleted: 0, more: false });
    expect(await memory.recall({ tenant: 'prune-t' }, 'n', 'kept')).not.toBeNull();
  });
});

describe('keyword scoring', () => {
  it('splits words on anything but letters and digits, after NFKC and lower-casing', () => {
    expect(words('Hello, WORLD! ｆｕｌｌ-width café_42')).toEqual([
      'hello',
      'world',
      'full',
      'width',
      'café',
      '42',
    ]);
    expect(queryWords('tea Tea TEA green')).toEqual(['tea', 'green']);
  });

  it('counts the key and every string of the value, not object keys or numbers', () => {
    const terms = documentTerms('green-tea', { tea: 'Tea time', n: 7, list: ['tea', { x: 'TEA' }] }, [
      'tea',
      'time',
    ]);
    expect(terms).toEqual({ length: 6, counts: [4, 1] });
  });

  it('scores in [0, 1): more matches and rarer words score higher', () => {
    const query = ['moon', 'tides'];
    const documents = [
      documentTerms('a', 'moon tides tides', query),
      documentTerms('b', 'moon and more words here', query),
      documentTerms('c', 'moon', query),
    ];
    const scores = bm25Scores(documents, 10, 3, query.length);
    for (const score of scores) {
      expect(score).toBeGreaterThan(0);
      expect(score).toBeLessThan(1);
    }
    expect(scores[0]).toBeGreaterThan(scores[2] ?? 1);
    expect(scores[2]).toBeGreaterThan(scores[1] ?? 1);
  });
});
