import { randomBytes } from 'node:crypto';

import { afterEach, beforeEach, describe, expect, it } from 'vitest';

import { Encryption, type SealingCodec } from '../../shared/crypto/encryption';
import { addCounts, emptyCounts, type RewrapPage } from '../../shared/crypto/rewrap';
import { sealedKeyId } from '../../shared/crypto/sealedFormat';
import { factId, namespaceDigest } from '../../shared/memory/layout';
import { MemoryFacts, placeOf } from '../../shared/memory/memory';
import { memoryRewrapTarget } from '../../shared/memory/memoryRewrap';
import {
  type FactHeader,
  type MemoryStore,
  SCAN_PARTS,
  scanPartOf,
  type StoredFact,
} from '../../shared/memory/memoryStore';
import {
  IntegrityError,
  InvalidArgumentError,
  PayloadTooLargeError,
  PreconditionFailedError,
} from '../../shared/protocol/errors';
import { LocalKeyValueStoreFactory } from '../../shared/storage/local/localKeyValueStore';
import { tempDir } from '../support/cleanup';
import { DelegatingMemoryStore } from '../support/delegatingMemoryStore';
import { type RecordingAudit, recordingAudit } from '../support/recordingAudit';

/**
 * The memory contract, as obligations every implementation of MemoryStore must meet, checked
 * through the memory facts on top of it (what callers rely on). Each test gets a fresh store and a
 * clock it moves itself, so expiry needs no waiting. With `sealed`, the whole contract runs again
 * as the app runs with encryption keys and the audit trail on: every value sealed with a key, every
 * change through the audit protocol (a log in memory); plus what sealing must add.
 */
export interface MemoryStoreFixture {
  readonly name: string;
  /** Values sealed (key `k1`) and changes audited. */
  readonly sealed?: boolean;
  /**
   * A fresh, empty store, `another()`: a second store over the same storage (another instance),
   * and `raw()`: every stored row's bytes as the storage holds them (files, table entities).
   */
  create(): Promise<{
    store: MemoryStore;
    another: () => MemoryStore;
    destroy: () => Promise<void>;
    raw: () => Promise<Buffer[]>;
  }>;
}

/** The codec of encryption at rest with `keys` (the first seals), its key check passed. */
export async function sealingCodec(
  keys: readonly { id: string; key: Buffer }[],
  kvDir = tempDir('memory-keys'),
): Promise<SealingCodec> {
  const encryption = new Encryption({ keys, kvStores: new LocalKeyValueStoreFactory(kvDir, 1024 * 1024) });
  await encryption.check();
  return encryption.codec;
}

/** Every row of `tenant`, values included, through the store's own paging. */
export async function allRows(store: MemoryStore, tenant: string): Promise<StoredFact[]> {
  const rows: StoredFact[] = [];
  let cursor: string | undefined;
  do {
    const page = await store.scan(tenant, '', { pageSize: 7, ...(cursor === undefined ? {} : { cursor }) });
    rows.push(...page.facts);
    cursor = page.cursor ?? undefined;
  } while (cursor !== undefined);
  return rows;
}

const A = { tenant: 'tenant-a' };
const B = { tenant: 'tenant-b' };

export function describeMemoryStoreContract(fixture: MemoryStoreFixture): void {
  describe(`MemoryStore contract: ${fixture.name}`, () => {
    let store: MemoryStore;
    let another: () => MemoryStore;
    let destroy: () => Promise<void>;
    let raw: () => Promise<Buffer[]>;
    let clock: number;
    let memory: MemoryFacts;
    let codec: SealingCodec | undefined;
    let audit: RecordingAudit | undefined;
    const facts = (over: MemoryStore = store) =>
      new MemoryFacts({
        store: over,
        now: () => clock,
        ...(codec === undefined ? {} : { codec }),
        ...(audit === undefined ? {} : { audit: audit.log }),
      });

    beforeEach(async () => {
      ({ store, another, destroy, raw } = await fixture.create());
      clock = Date.UTC(2026, 0, 1);
      if (fixture.sealed === true) {
        codec = await sealingCodec([{ id: 'k1', key: randomBytes(32) }]);
        audit = recordingAudit();
      }
      memory = facts();
    });
    afterEach(async () => destroy());

    it('keeps incarnation and outbox as written; headers are the rows of scan without values, same order and cursors', async () => {
      const row = (key: string, extra: Partial<StoredFact> = {}) => ({
        namespace: 'h',
        key,
        value: Buffer.from(`"${key}"`),
        createdAt: 1,
        updatedAt: 2,
        expiresAt: null,
        incarnation: null,
        outbox: null,
        ...extra,
      });
      const outbox = JSON.stringify([{ id: 'ev-1', subject: '["h","k0"]' }]) + ' '.repeat(20_000);
      await store.write(A.tenant, row('k0', { incarnation: 'inc-0', outbox, expiresAt: 5 }), null);
      for (let i = 1; i < 5; i++) await store.write(A.tenant, row(`k${i}`), null);
      const k0 = await store.get(A.tenant, 'h', 'k0');
      expect(k0).toMatchObject({ incarnation: 'inc-0', outbox, expiresAt: 5 });
      expect(await store.get(A.tenant, 'h', 'k1')).toMatchObject({ incarnation: null, outbox: null });
      // A write over it replaces both (here: removes them).
      await store.write(A.tenant, row('k0'), k0?.etag ?? null);
      expect(await store.get(A.tenant, 'h', 'k0')).toMatchObject({ incarnation: null, outbox: null });

      const header = (fact: StoredFact): FactHeader => {
        const { namespace, key, createdAt, updatedAt, expiresAt, incarnation, outbox, etag } = fact;
        return { namespace, key, createdAt, updatedAt, expiresAt, incarnation, outbox, etag };
      };
      let cursor: string | undefined;
      let pages = 0;
      do {
        const options = { pageSize: 2, ...(cursor === undefined ? {} : { cursor }) };
        const [scanned, listed] = await Promise.all([
          store.scan(A.tenant, 'h', options),
          store.headers(A.tenant, 'h', options),
        ]);
        expect(listed).toEqual({ headers: scanned.facts.map(header), cursor: scanned.cursor });
        cursor = listed.cursor ?? undefined;
        pages++;
      } while (cursor !== undefined);
      expect(pages).toBe(3);
      expect(await store.headers(B.tenant, '', { pageSize: 10 })).toEqual({ headers: [], cursor: null });
    });

    it('scans a subtree in parts that hold each of its rows once, also after a cursor of the whole', async () => {
      const row = (namespace: string, key: string) => ({
        namespace,
        key,
        value: Buffer.from(`"${namespace}:${key}"`),
        createdAt: 1,
        updatedAt: 2,
        expiresAt: null,
        incarnation: null,
        outbox: null,
      });
      const names = ['parts', 'parts/x', 'parts/y', 'parts/z/w', 'parts/x/deep', 'partsX', 'other'];
      for (const [n, namespace] of names.entries()) {
        for (let i = 0; i < 3; i++) await store.write(A.tenant, row(namespace, `k${n}-${i}`), null);
      }
      const name = (fact: StoredFact) => `${fact.namespace}:${fact.key}`;
      const readAll = async (options: { part?: number; cursor?: string }) => {
        const rows: StoredFact[] = [];
        let cursor = options.cursor;
        do {
          const page = await store.scan(A.tenant, 'parts', {
            pageSize: 2,
            ...(options.part === undefined ? {} : { part: options.part }),
            ...(cursor === undefined ? {} : { cursor }),
          });
          rows.push(...page.facts);
          cursor = page.cursor ?? undefined;
        } while (cursor !== undefined);
        return rows;
      };
      const whole = (await readAll({})).map(name).sort();
      expect(whole).toHaveLength(15);
      expect(whole.every((entry) => entry.startsWith('parts:') || entry.startsWith('parts/'))).toBe(true);
      const digest = namespaceDigest('parts');
      const inParts: string[] = [];
      for (let part = 0; part < SCAN_PARTS; part++) {
        for (const fact of await readAll({ part })) {
          expect(scanPartOf(digest, factId(fact.namespace, fact.key))).toBe(part);
          inParts.push(name(fact));
        }
      }
      expect(inParts.sort()).toEqual(whole);
      // After a first page of the whole subtree, the parts hold exactly the rows not on it.
      const first = await store.scan(A.tenant, 'parts', { pageSize: 4 });
      expect(first.cursor).not.toBeNull();
      const rest: string[] = [];
      for (let part = 0; part < SCAN_PARTS; part++) {
        rest.push(...(await readAll({ part, cursor: first.cursor as string })).map(name));
      }
      expect([...first.facts.map(name), ...rest].sort()).toEqual(whole);
    });

    it('prunes only the expired rows `keep` does not spare', async () => {
      for (const key of ['spared', 'pruned', 'live']) {
        await memory.remember(A, 'k', key, key, key === 'live' ? {} : { ttl: 1 });
      }
      clock += 1000;
      const asked: string[] = [];
      const result = await store.pruneExpired(A.tenant, {
        now: clock,
        budget: 10,
        keep: async (row) => {
          asked.push(row.key);
          return row.key === 'spared';
        },
      });
      expect(result).toEqual({ deleted: 1, more: false });
      expect(asked.sort()).toEqual(['pruned', 'spared']);
      expect(await store.get(A.tenant, 'k', 'spared')).not.toBeNull();
      expect(await store.get(A.tenant, 'k', 'pruned')).toBeNull();
      expect(await store.get(A.tenant, 'k', 'live')).not.toBeNull();
    });

    if (fixture.sealed === true) {
      it('stores no plaintext of a value; a sealed value moved to another fact or tenant, or plain bytes, are integrity_error', async () => {
        const marker = `MARKER${randomBytes(8).toString('hex')}`;
        await memory.remember(A, 'users/42', 'secret', { text: marker, list: [marker] });
        await memory.remember(A, 'users/42', 'other', `${marker} again`, { ttl: 60 });
        expect((await memory.recall(A, 'users/42', 'secret'))?.value).toEqual({
          text: marker,
          list: [marker],
        });
        const rows = await raw();
        expect(rows.length).toBe(2);
        // The storage's own bytes, and each value as the store hands it back, both sealed with k1.
        for (const bytes of rows) expect(bytes.includes(marker)).toBe(false);
        for (const row of await allRows(store, A.tenant)) {
          expect(row.value.includes(marker)).toBe(false);
          expect(sealedKeyId(row.value)).toBe('k1');
        }
        // No record holds the value either.
        expect(JSON.stringify(audit?.committed)).not.toContain(marker);

        const row = await store.get(A.tenant, 'users/42', 'secret');
        if (row === null) throw new Error('the fact is missing');
        const sealed = { ...row, etag: undefined };
        await store.write(A.tenant, { ...sealed, key: 'copy' }, null);
        await store.write(B.tenant, sealed, null);
        await store.write(A.tenant, { ...sealed, namespace: 'users/43' }, null);
        for (const [caller, namespace, key] of [
          [A, 'users/42', 'copy'],
          [B, 'users/42', 'secret'],
          [A, 'users/43', 'secret'],
        ] as const) {
          await expect(memory.recall(caller, namespace, key)).rejects.toBeInstanceOf(IntegrityError);
        }
        await expect(memory.search(A, { namespace: 'users', text: 'x' })).rejects.toBeInstanceOf(
          IntegrityError,
        );
        // Plain bytes where sealed ones are expected: tampering, not an old format.
        await store.write(
          A.tenant,
          { ...sealed, key: 'plain', value: Buffer.from(JSON.stringify('plain')) },
          null,
        );
        await expect(memory.recall(A, 'users/42', 'plain')).rejects.toBeInstanceOf(IntegrityError);
        // The original still reads.
        expect((await memory.recall(A, 'users/42', 'secret'))?.value).toEqual({
          text: marker,
          list: [marker],
        });
      });
    }

    it('answers absent and empty before anything is stored, never an error', async () => {
      expect(await memory.recall(A, 'users/42', 'language')).toBeNull();
      expect(await memory.forget(A, 'users/42', 'language')).toBe(false);
      expect(await memory.search(A, { namespace: '' })).toEqual({ items: [], truncated: false });
      expect(await memory.listNamespaces(A)).toEqual({ namespaces: [], truncated: false });
      expect(await memory.forgetAll(A, '', { all: true })).toEqual({ deleted: 0, more: false });
      expect(await memory.pruneExpired(A.tenant, 10)).toEqual({ deleted: 0, more: false });
    });

    it('relists a fact in the feed without changing its row; a forget that finds no row relists it', async () => {
      const { item } = await memory.remember(A, 'notes', 'kept', { text: 'stays' });
      const start = await store.changes(A.tenant, null);
      await store.relist(A.tenant, [factId('notes', 'kept')]);
      const relisted = await store.changes(A.tenant, start.position);
      expect(relisted.ids).toEqual([factId('notes', 'kept')]);
      expect((await memory.recall(A, 'notes', 'kept'))?.etag).toBe(item.etag);
      // What heals a delete whose own listing failed: its retry finds no row, and lists it.
      expect(await memory.forget(A, 'notes', 'gone')).toBe(false);
      expect((await store.changes(A.tenant, relisted.position)).ids).toEqual([factId('notes', 'gone')]);
    });

    it('remembers and recalls any JSON value, names of any characters included', async () => {
      const value = { text: 'Français', n: 1.5, list: [1, 'two', null], nested: { ok: true } };
      const { item, created } = await memory.remember(A, 'users/42', 'language', value);
      expect(created).toBe(true);
      expect(item).toMatchObject({ namespace: ['users', '42'], key: 'language', value });
      expect(item.createdAt).toBe(clock);
      expect(item.updatedAt).toBe(clock);
      expect(item.expiresAt).toBeUndefined();
      expect(item.etag).toMatch(/^"[^"]+"$/);
      expect(await memory.recall(A, 'users/42', 'language')).toEqual(item);
      expect(await facts(another()).recall(A, 'users/42', 'language')).toEqual(item);

      for (const [namespace, key] of [
        ['../..', '..'],
        ['a b/ü/日本/%2F/#?\\', 'key/with/slashes #?\\%'],
        ['x'.repeat(512), 'k'.repeat(512)],
        [Array.from({ length: 16 }, (_, i) => `s${i}`).join('/'), '🙂'],
      ] as const) {
        await memory.remember(A, namespace, key, [namespace, key]);
        expect((await memory.recall(A, namespace, key))?.value).toEqual([namespace, key]);
      }
      for (const value of [null, 0, 'text', false, []]) {
        await memory.remember(A, 'scalars', 'v', value);
        expect((await memory.recall(A, 'scalars', 'v'))?.value).toEqual(value);
      }
    });

    it('replaces the value, keeps createdAt, moves updatedAt strictly forward and changes the ETag', async () => {
      const first = await memory.remember(A, 'ns', 'k', 'A');
      clock += 5;
      const second = await memory.remember(A, 'ns', 'k', 'B');
      expect(second.created).toBe(false);
      expect(second.item.createdAt).toBe(first.item.createdAt);
      expect(second.item.updatedAt).toBe(clock);
      // Within one millisecond (the clock stands still) every write still moves updatedAt forward.
      const third = await memory.remember(A, 'ns', 'k', 'A');
      const fourth = await memory.remember(A, 'ns', 'k', 'A');
      expect(third.item.updatedAt).toBe(clock + 1);
      expect(fourth.item.updatedAt).toBe(clock + 2);
      expect(new Set([first, second, third, fourth].map(({ item }) => item.etag)).size).toBe(4);
      expect((await memory.recall(A, 'ns', 'k'))?.value).toBe('A');
      // Also when the clock goes back.
      clock -= 1000;
      expect((await memory.remember(A, 'ns', 'k', 'C')).item.updatedAt).toBe(fourth.item.updatedAt + 1);
    });

    it('makes If-Match a compare-and-swap and If-None-Match: * a create-only write', async () => {
      const { item } = await memory.remember(A, 'ns', 'k', 1);
      const next = await memory.remember(A, 'ns', 'k', 2, { conditions: { ifMatch: item.etag } });
      const stale = await memory
        .remember(A, 'ns', 'k', 3, { conditions: { ifMatch: item.etag } })
        .catch((error: unknown) => error);
      expect(stale).toBeInstanceOf(PreconditionFailedError);
      expect((stale as PreconditionFailedError).currentEtag).toBe(next.item.etag);
      expect((await memory.recall(A, 'ns', 'k'))?.value).toBe(2);

      await expect(
        memory.remember(A, 'ns', 'absent', 1, { conditions: { ifMatch: '*' } }),
      ).rejects.toBeInstanceOf(PreconditionFailedError);
      await expect(
        memory.remember(A, 'ns', 'k', 1, { conditions: { ifAbsent: true } }),
      ).rejects.toBeInstanceOf(PreconditionFailedError);
      expect((await memory.remember(A, 'ns', 'new', 1, { conditions: { ifAbsent: true } })).created).toBe(
        true,
      );
      expect((await memory.remember(A, 'ns', 'k', 4, { conditions: { ifMatch: '*' } })).item.value).toBe(4);

      // forget with If-Match: only the version named; absent fails too.
      const current = await memory.recall(A, 'ns', 'k');
      await expect(memory.forget(A, 'ns', 'k', { ifMatch: item.etag })).rejects.toBeInstanceOf(
        PreconditionFailedError,
      );
      expect(await memory.forget(A, 'ns', 'k', { ifMatch: current?.etag ?? '' })).toBe(true);
      await expect(memory.forget(A, 'ns', 'k', { ifMatch: current?.etag ?? '' })).rejects.toBeInstanceOf(
        PreconditionFailedError,
      );
      expect(await memory.forget(A, 'ns', 'k')).toBe(false);
    });

    it('of 16 compare-and-swap writers on one version exactly one wins; read-modify-write loops lose nothing', async () => {
      const { item } = await memory.remember(A, 'race', 'counter', { n: 0 });
      const instances = Array.from({ length: 16 }, () => facts(another()));
      const outcomes = await Promise.allSettled(
        instances.map((instance, i) =>
          instance.remember(A, 'race', 'counter', { n: 1, by: i }, { conditions: { ifMatch: item.etag } }),
        ),
      );
      const won = outcomes.filter((outcome) => outcome.status === 'fulfilled');
      expect(won).toHaveLength(1);
      for (const outcome of outcomes) {
        if (outcome.status === 'rejected') expect(outcome.reason).toBeInstanceOf(PreconditionFailedError);
      }
      const winner = (won[0] as PromiseFulfilledResult<{ item: { value: unknown } }>).value.item.value;
      expect((await memory.recall(A, 'race', 'counter'))?.value).toEqual(winner);

      // 16 writers each add 3 with read, compare-and-swap, retry on 412: the sum is exact.
      await memory.remember(A, 'race', 'sum', 0);
      await Promise.all(
        instances.map(async (instance) => {
          for (let done = 0; done < 3;) {
            const current = await instance.recall(A, 'race', 'sum');
            try {
              await instance.remember(A, 'race', 'sum', (current?.value as number) + 1, {
                conditions: { ifMatch: current?.etag ?? '*' },
              });
              done++;
            } catch (error) {
              if (!(error instanceof PreconditionFailedError)) throw error;
            }
          }
        }),
      );
      expect((await memory.recall(A, 'race', 'sum'))?.value).toBe(48);

      // Unconditional writers all land, each whole; updatedAt ends past every one of them.
      const unconditional = await Promise.all(
        instances.map((instance, i) => instance.remember(A, 'race', 'last', { by: i, pad: 'x'.repeat(100) })),
      );
      const stored = await memory.recall(A, 'race', 'last');
      expect(unconditional.map(({ item }) => item.value)).toContainEqual(stored?.value);
      expect(stored?.updatedAt).toBe(Math.max(...unconditional.map(({ item }) => item.updatedAt)));
      expect(new Set(unconditional.map(({ item }) => item.updatedAt)).size).toBe(16);
    });

    it('writes correctly on an instance whose last known version is stale (changed, expired or deleted elsewhere)', async () => {
      const here = memory;
      const there = facts(another());
      const first = await here.remember(A, 'shared', 'k', 1);
      clock += 10;
      const changed = await there.remember(A, 'shared', 'k', 2, { ttl: 5 });
      // `here` last saw `first`: its write must land on the current version, not over it blindly.
      const stale = await here
        .remember(A, 'shared', 'k', 3, { conditions: { ifMatch: first.item.etag } })
        .catch((error: unknown) => error);
      expect(stale).toBeInstanceOf(PreconditionFailedError);
      expect((stale as PreconditionFailedError).currentEtag).toBe(changed.item.etag);
      const next = await here.remember(A, 'shared', 'k', 4);
      expect(next.created).toBe(false);
      expect(next.item.createdAt).toBe(first.item.createdAt);
      expect(next.item.updatedAt).toBeGreaterThan(changed.item.updatedAt);
      expect(next.item.expiresAt).toBeUndefined();
      // Deleted elsewhere: a new fact.
      clock += 10;
      await there.forget(A, 'shared', 'k');
      const again = await here.remember(A, 'shared', 'k', 5);
      expect(again.created).toBe(true);
      expect(again.item.createdAt).toBe(clock);
      // Expired elsewhere: absent, so a new fact too.
      await there.remember(A, 'shared', 'k', 6, { ttl: 1 });
      clock += 1000;
      const renewed = await here.remember(A, 'shared', 'k', 7);
      expect(renewed.created).toBe(true);
      expect((await there.recall(A, 'shared', 'k'))?.value).toBe(7);
    });

    it('hides an expired fact from every read before any prune; reads do not extend it; remember without ttl clears it', async () => {
      const { item } = await memory.remember(A, 'session/1', 'mood', 'curious', { ttl: 60 });
      expect(item.expiresAt).toBe(clock + 60_000);
      clock += 59_999;
      expect((await memory.recall(A, 'session/1', 'mood'))?.expiresAt).toBe(item.expiresAt);
      expect((await memory.search(A, { namespace: 'session' })).items).toHaveLength(1);
      clock += 1;
      expect(await memory.recall(A, 'session/1', 'mood')).toBeNull();
      expect((await memory.search(A, { namespace: '' })).items).toEqual([]);
      expect((await memory.search(A, { namespace: '', text: 'curious' })).items).toEqual([]);
      expect((await memory.listNamespaces(A)).namespaces).toEqual([]);
      // Absent for conditions too: If-Match fails, If-None-Match creates a new fact.
      await expect(
        memory.remember(A, 'session/1', 'mood', 'x', { conditions: { ifMatch: item.etag } }),
      ).rejects.toBeInstanceOf(PreconditionFailedError);
      const again = await memory.remember(A, 'session/1', 'mood', 'calm', { conditions: { ifAbsent: true } });
      expect(again.created).toBe(true);
      expect(again.item.createdAt).toBe(clock);
      expect(again.item.expiresAt).toBeUndefined();
      // A ttl set then cleared by a remember without one.
      await memory.remember(A, 'session/1', 'topic', 'tides', { ttl: 1 });
      await memory.remember(A, 'session/1', 'topic', 'tides');
      clock += 10_000;
      expect((await memory.recall(A, 'session/1', 'topic'))?.expiresAt).toBeUndefined();
    });

    it('prunes expired rows within a budget and leaves live and rewritten facts', async () => {
      for (let i = 0; i < 5; i++) await memory.remember(A, `p/${i % 2}`, `k${i}`, i, { ttl: 10 });
      await memory.remember(A, 'p/0', 'kept', 'live');
      await memory.remember(B, 'p/0', 'k0', 'other tenant', { ttl: 10 });
      clock += 10_000;
      expect(await memory.pruneExpired(A.tenant, 3)).toEqual({ deleted: 3, more: true });
      expect(await memory.pruneExpired(A.tenant, 3)).toEqual({ deleted: 2, more: false });
      expect(await memory.pruneExpired(A.tenant, 3)).toEqual({ deleted: 0, more: false });
      for (let i = 0; i < 5; i++) expect(await store.get(A.tenant, `p/${i % 2}`, `k${i}`)).toBeNull();
      expect((await memory.recall(A, 'p/0', 'kept'))?.value).toBe('live');
      expect(await store.get(B.tenant, 'p/0', 'k0')).not.toBeNull();
    });

    it('searches a namespace and below by whole segments, newest first without text', async () => {
      const layout: [string, string][] = [
        ['users', 'root'],
        ['users/42', 'name'],
        ['users/42/prefs', 'theme'],
        ['users/43', 'name'],
        ['usersX/1', 'name'],
        ['user', 'name'],
        ['teams/users', 'name'],
      ];
      for (const [namespace, key] of layout) {
        clock += 10;
        await memory.remember(A, namespace, key, `${namespace}:${key}`);
      }
      const found = async (namespace: string) =>
        (await memory.search(A, { namespace, limit: 100 })).items.map(({ value }) => value);
      expect(await found('users')).toEqual([
        'users/43:name',
        'users/42/prefs:theme',
        'users/42:name',
        'users:root',
      ]);
      expect(await found('users/42')).toEqual(['users/42/prefs:theme', 'users/42:name']);
      expect(await found('users/42/prefs')).toEqual(['users/42/prefs:theme']);
      expect(await found('usersX')).toEqual(['usersX/1:name']);
      expect(await found('nobody')).toEqual([]);
      expect(await found('')).toHaveLength(layout.length);
      expect(
        (await memory.search(A, { namespace: '', limit: 2, offset: 1 })).items.map(({ value }) => value),
      ).toEqual(['user:name', 'usersX/1:name']);
      expect((await memory.search(B, { namespace: '' })).items).toEqual([]);
    });

    it('ranks a search with text best first with scores in [0, 1] and a stable order of ties', async () => {
      await memory.remember(A, 'kb', 'tides', { text: 'The moon moves the tides; tides twice a day' });
      await memory.remember(A, 'kb', 'moon', { text: 'The moon orbits the earth' });
      await memory.remember(A, 'kb/deep', 'lunar', ['nothing about it', { note: 'MOON landing, 1969' }]);
      await memory.remember(A, 'kb', 'sun', { text: 'The sun is a star' });
      await memory.remember(A, 'kbX', 'moon', { text: 'moon moon moon' });
      const result = await memory.search(A, { namespace: 'kb', text: 'Moon tides' });
      const keys = result.items.map(({ key }) => key);
      expect(keys[0]).toBe('tides');
      expect(new Set(keys)).toEqual(new Set(['tides', 'moon', 'lunar']));
      for (const item of result.items) {
        expect(item.score).toBeGreaterThan(0);
        expect(item.score).toBeLessThanOrEqual(1);
      }
      const scores = result.items.map(({ score }) => score ?? 0);
      expect([...scores].sort((a, b) => b - a)).toEqual(scores);
      // The key is searched too; a word matches whole words only.
      expect((await memory.search(A, { namespace: 'kb', text: 'sun' })).items.map(({ key }) => key)).toEqual([
        'sun',
      ]);
      expect((await memory.search(A, { namespace: 'kb', text: 'moo' })).items).toEqual([]);
      // Equal scores: newer first.
      clock += 1;
      await memory.remember(A, 'ties', 'a', 'same words');
      clock += 1;
      await memory.remember(A, 'ties', 'b', 'same words');
      const ties = await memory.search(A, { namespace: 'ties', text: 'words' });
      expect(ties.items.map(({ key }) => key)).toEqual(['b', 'a']);
      expect(ties.items[0]?.score).toBe(ties.items[1]?.score);
    });

    it('filters on top-level value fields with every operator', async () => {
      const values = [
        { id: 1, status: 'active', score: 5, tags: ['a'] },
        { id: 2, status: 'archived', score: 3 },
        { id: 3, status: 'active', score: 1, extra: null },
        { id: 4, status: 'active', score: '9' },
      ];
      for (const value of values) await memory.remember(A, 'docs', `d${value.id}`, value);
      await memory.remember(A, 'docs', 'scalar', 'not an object');
      const ids = async (filter: Record<string, unknown>) =>
        (await memory.search(A, { namespace: 'docs', filter, limit: 100 })).items
          .map(({ value }) => (value as { id?: number }).id ?? 'scalar')
          .sort();
      expect(await ids({ status: 'active' })).toEqual([1, 3, 4]);
      expect(await ids({ status: { $eq: 'archived' } })).toEqual([2]);
      expect(await ids({ status: { $ne: 'active' } })).toEqual([2, 'scalar']);
      expect(await ids({ score: { $gt: 1 } })).toEqual([1, 2]);
      expect(await ids({ score: { $gte: 3, $lt: 5 } })).toEqual([2]);
      expect(await ids({ score: { $lte: 1 } })).toEqual([3]);
      expect(await ids({ id: { $in: [1, 4] } })).toEqual([1, 4]);
      expect(await ids({ id: { $nin: [1, 4] } })).toEqual([2, 3, 'scalar']);
      expect(await ids({ extra: { $exists: true } })).toEqual([3]);
      expect(await ids({ tags: ['a'] })).toEqual([1]);
      expect(await ids({ status: 'active', score: { $gt: 2 } })).toEqual([1]);
      // Filter first, then limit and offset: the page is of matching facts.
      const page = await memory.search(A, {
        namespace: 'docs',
        filter: { status: 'active' },
        limit: 1,
        offset: 1,
      });
      expect(page.items).toHaveLength(1);
      expect((page.items[0]?.value as { status: string }).status).toBe('active');
    });

    it('forgets a namespace and below, counts live facts, is idempotent and refuses "" without all', async () => {
      for (const namespace of ['users', 'users/42', 'users/42/x', 'usersX/1', 'teams']) {
        await memory.remember(A, namespace, 'k', namespace);
      }
      await memory.remember(A, 'users/42', 'short', 'lived', { ttl: 1 });
      await memory.remember(B, 'users', 'k', 'other tenant');
      clock += 1000;
      expect(await memory.forgetAll(A, 'users')).toEqual({ deleted: 3, more: false });
      expect(await memory.forgetAll(A, 'users')).toEqual({ deleted: 0, more: false });
      expect(await store.get(A.tenant, 'users/42', 'short')).toBeNull();
      expect((await memory.search(A, { namespace: '' })).items.map(({ value }) => value).sort()).toEqual([
        'teams',
        'usersX/1',
      ]);
      expect((await memory.recall(B, 'users', 'k'))?.value).toBe('other tenant');
      await expect(memory.forgetAll(A, '')).rejects.toBeInstanceOf(InvalidArgumentError);
      expect(await memory.forgetAll(A, '', { all: true })).toEqual({ deleted: 2, more: false });
      expect((await memory.search(A, { namespace: '' })).items).toEqual([]);
      expect((await memory.recall(B, 'users', 'k'))?.value).toBe('other tenant');
    });

    it('forgets at most 1,000 facts per call and says when more remain', async () => {
      const batch = 1001;
      let next = 0;
      await Promise.all(
        Array.from({ length: 8 }, async () => {
          while (next < batch) {
            const i = next++;
            await memory.remember(A, `bulk/${i % 7}`, `k${i}`, i);
          }
        }),
      );
      // More rows than one page: a fresh instance reads the first page, then the parts side by side.
      const fresh = facts();
      const found = [
        ...(await fresh.search(A, { namespace: 'bulk', limit: 1000 })).items,
        ...(await fresh.search(A, { namespace: 'bulk', limit: 1000, offset: 1000 })).items,
      ].map((item) => item.key);
      expect(new Set(found).size).toBe(batch);
      expect(await memory.forgetAll(A, 'bulk')).toEqual({ deleted: 1000, more: true });
      expect(await memory.forgetAll(A, 'bulk')).toEqual({ deleted: 1, more: false });
      expect((await memory.search(A, { namespace: 'bulk' })).items).toEqual([]);
    });

    it('lists distinct live namespaces with prefix, suffix, maxDepth, offset and limit', async () => {
      for (const namespace of ['a/b/c', 'a/b', 'a/x/c', 'a/y', 'b/c', 'ab/c', 'z/expired']) {
        await memory.remember(A, namespace, 'k', 1, namespace === 'z/expired' ? { ttl: 1 } : {});
        await memory.remember(A, namespace, 'k2', 2, namespace === 'z/expired' ? { ttl: 1 } : {});
      }
      clock += 1000;
      const list = async (listing: Parameters<MemoryFacts['listNamespaces']>[1]) =>
        (await memory.listNamespaces(A, listing)).namespaces.map((segments) => segments.join('/'));
      expect(await list({})).toEqual(['a/b', 'a/b/c', 'a/x/c', 'a/y', 'ab/c', 'b/c']);
      expect(await list({ prefix: 'a' })).toEqual(['a/b', 'a/b/c', 'a/x/c', 'a/y']);
      expect(await list({ prefix: 'a/b' })).toEqual(['a/b', 'a/b/c']);
      expect(await list({ suffix: 'c' })).toEqual(['a/b/c', 'a/x/c', 'ab/c', 'b/c']);
      expect(await list({ suffix: 'b/c' })).toEqual(['a/b/c', 'b/c']);
      expect(await list({ maxDepth: 1 })).toEqual(['a', 'ab', 'b']);
      expect(await list({ prefix: 'a', maxDepth: 2 })).toEqual(['a/b', 'a/x', 'a/y']);
      expect(await list({ limit: 2, offset: 1 })).toEqual(['a/b/c', 'a/x/c']);
      expect(await memory.listNamespaces(B)).toEqual({ namespaces: [], truncated: false });
    });

    it('checks every input before any storage request', async () => {
      const refused = new MemoryFacts({ store: poisoned(), now: () => clock });
      const invalid: [string, () => Promise<unknown>][] = [
        ['namespace', () => refused.remember(A, '', 'k', 1)],
        ['namespace', () => refused.remember(A, '/a', 'k', 1)],
        ['namespace', () => refused.remember(A, 'a/', 'k', 1)],
        ['namespace', () => refused.remember(A, 'a//b', 'k', 1)],
        ['namespace', () => refused.remember(A, 'a\nb', 'k', 1)],
        ['namespace', () => refused.remember(A, 'x'.repeat(513), 'k', 1)],
        ['namespace', () => refused.remember(A, Array(17).fill('s').join('/'), 'k', 1)],
        ['namespace', () => refused.recall(A, 'a\u007f', 'k')],
        ['key', () => refused.remember(A, 'a', '', 1)],
        ['key', () => refused.remember(A, 'a', 'k\u0000', 1)],
        ['key', () => refused.recall(A, 'a', 'k'.repeat(513))],
        ['key', () => refused.forget(A, 'a', '\ud800')],
        ['value', () => refused.remember(A, 'a', 'k', undefined)],
        ['ttl', () => refused.remember(A, 'a', 'k', 1, { ttl: 0 })],
        ['ttl', () => refused.remember(A, 'a', 'k', 1, { ttl: 1.5 })],
        ['limit', () => refused.search(A, { namespace: 'a', limit: 0 })],
        ['limit', () => refused.search(A, { namespace: 'a', limit: 1001 })],
        ['offset', () => refused.search(A, { namespace: 'a', offset: -1 })],
        ['namespace', () => refused.search(A, { namespace: 'a//b' })],
        ['namespace', () => refused.forgetAll(A, '')],
        ['prefix', () => refused.listNamespaces(A, { prefix: 'a/' })],
        ['maxDepth', () => refused.listNamespaces(A, { maxDepth: 0 })],
      ];
      for (const [field, call] of invalid) {
        const error = await call().catch((caught: unknown) => caught);
        expect(error, field).toBeInstanceOf(InvalidArgumentError);
        expect((error as InvalidArgumentError).field).toBe(field);
      }
      const big = await refused.remember(A, 'a', 'k', 'x'.repeat(32 * 1024)).catch((error: unknown) => error);
      expect(big).toBeInstanceOf(PayloadTooLargeError);
      // 32 KiB of JSON exactly is accepted (two quotes around 32,766 characters).
      const fits = await memory.remember(A, 'a', 'k', 'x'.repeat(32 * 1024 - 2));
      expect(fits.created).toBe(true);
    });
  });
}

/** A store that fails the test on any call: inputs must be refused before storage is touched. */
function poisoned(): MemoryStore {
  const fail = () => Promise.reject(new Error('storage was called for an invalid request'));
  return {
    readIndex: fail,
    changes: fail,
    fetch: fail,
    createIndex: fail,
    get: fail,
    write: fail,
    writeMany: fail,
    delete: fail,
    relist: fail,
    scan: fail,
    headers: fail,
    namespaces: fail,
    deleteSubtree: fail,
    pruneExpired: fail,
  };
}

/** A store that runs a hook (once) before the first write of a chosen fact: another writer got there first. */
class Interfering extends DelegatingMemoryStore {
  constructor(
    inner: MemoryStore,
    private readonly before: Map<string, () => Promise<void>>,
  ) {
    super(inner);
  }
  override async write(...args: Parameters<MemoryStore['write']>) {
    const hook = this.before.get(args[1].key);
    this.before.delete(args[1].key);
    await hook?.();
    return this.inner.write(...args);
  }
}

/**
 * The memory target of the `rewrap` job on a store: after a new first key, every stored value ends
 * sealed with it, page by page from a cursor (a page run by a fresh target resumes); a fact written
 * or forgotten while the job runs keeps that change (the job's write is conditional: it reads the
 * fact again, counts what it then finds, or skips it when gone); a second run re-seals nothing; and
 * with the old key removed every fact still reads.
 */
export function describeMemoryRewrap(fixture: MemoryStoreFixture): void {
  describe(`memory rewrap target: ${fixture.name}`, () => {
    let store: MemoryStore;
    let destroy: () => Promise<void>;
    beforeEach(async () => {
      ({ store, destroy } = await fixture.create());
    });
    afterEach(async () => destroy());

    /** Every page of `tenant` with `limit`, each page by a fresh target (as each activity is). */
    const runJob = async (over: MemoryStore, codec: SealingCodec, tenant: string) => {
      const total = emptyCounts();
      let cursor: string | null = null;
      let pages = 0;
      do {
        const page: RewrapPage = await memoryRewrapTarget(over, codec).rewrapPage(tenant, cursor, 4);
        addCounts(total, page);
        cursor = page.next;
        pages++;
      } while (cursor !== null);
      return { ...total, pages };
    };

    it('re-seals every fact with the first key, keeps what writers change meanwhile, and loses nothing once the old key is gone', async () => {
      const kvDir = tempDir('memory-rewrap-keys');
      const k1 = { id: 'k1', key: randomBytes(32) };
      const k2 = { id: 'k2', key: randomBytes(32) };
      let clock = Date.UTC(2026, 0, 1);
      const now = () => clock;
      const expected = new Map<string, unknown>();
      const remember = async (
        facts: MemoryFacts,
        tenant: string,
        namespace: string,
        key: string,
        value: unknown,
      ) => {
        await facts.remember({ tenant }, namespace, key, value);
        expected.set(JSON.stringify([tenant, namespace, key]), value);
      };

      const before = new MemoryFacts({ store, now, codec: await sealingCodec([k1], kvDir) });
      for (let i = 0; i < 22; i++)
        await remember(before, A.tenant, `ns/${i % 4}`, `k${i}`, { i, text: `value ${i}` });
      for (let i = 0; i < 3; i++) await remember(before, B.tenant, 'b', `k${i}`, i);
      // An expired fact is a stored sealed value too: re-sealed like the others.
      await before.remember(A, 'ns/x', 'expired', 'old', { ttl: 1 });
      clock += 2000;

      const rotated = await sealingCodec([k2, k1], kvDir);
      const after = new MemoryFacts({ store, now, codec: rotated });
      for (let i = 22; i < 26; i++) await remember(after, A.tenant, 'ns/new', `k${i}`, i);
      await remember(after, A.tenant, 'ns/0', 'k0', 'rewritten');

      // Just before the job writes them back: k5 is written anew (with k2), k6 is forgotten.
      const interfering = new Interfering(
        store,
        new Map([
          ['k5', () => remember(after, A.tenant, 'ns/1', 'k5', 'changed meanwhile')],
          [
            'k6',
            async () => {
              await after.forget(A, 'ns/2', 'k6');
              expected.delete(JSON.stringify([A.tenant, 'ns/2', 'k6']));
            },
          ],
        ]),
      );
      const first = await runJob(interfering, rotated, A.tenant);
      // 27 rows; k6 went (not counted); k5 was read again and found sealed with k2.
      expect(first).toMatchObject({
        examined: 26,
        resealed: 20,
        sealedWith: { k1: 20, k2: 6 },
        remaining: {},
        errors: [],
      });
      expect(first.pages).toBe(7);
      expect(await runJob(store, rotated, B.tenant)).toMatchObject({
        examined: 3,
        resealed: 3,
        sealedWith: { k1: 3 },
        remaining: {},
      });
      for (const tenant of [A.tenant, B.tenant]) {
        expect(new Set((await allRows(store, tenant)).map((row) => sealedKeyId(row.value)))).toEqual(
          new Set(['k2']),
        );
      }
      // Idempotent: nothing is left to re-seal.
      expect(await runJob(store, rotated, A.tenant)).toMatchObject({
        examined: 26,
        resealed: 0,
        sealedWith: { k2: 26 },
      });

      // The old key removed: every fact reads, the expired one's bytes open too.
      const onlyK2 = await sealingCodec([k2], kvDir);
      const last = new MemoryFacts({ store, now, codec: onlyK2 });
      for (const [place, value] of expected) {
        const [tenant, namespace, key] = JSON.parse(place) as [string, string, string];
        expect((await last.recall({ tenant }, namespace, key))?.value, place).toEqual(value);
      }
      expect((await last.recall(A, 'ns/1', 'k5'))?.value).toBe('changed meanwhile');
      expect(await last.recall(A, 'ns/2', 'k6')).toBeNull();
      expect((await last.search(A, { namespace: '', limit: 100 })).items).toHaveLength(25);
      const expired = await store.get(A.tenant, 'ns/x', 'expired');
      expect(
        onlyK2.open(expired?.value ?? Buffer.alloc(0), placeOf(A.tenant, 'ns/x', 'expired')).toString(),
      ).toBe('"old"');
    });
  });
}
