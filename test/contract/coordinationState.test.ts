import { randomUUID } from 'node:crypto';

import { describe, expect, it } from 'vitest';

import { ChatCursorCache } from '../../shared/coordination/chatCursorCache';
import {
  chatCursorKey,
  claimDelivery,
  isCursorStale,
  resolveChatCursor,
} from '../../shared/coordination/chatCursors';
import {
  claimEmailWindow,
  EMAIL_CURSOR_KEY,
  type EmailClaimRequest,
  initializeEmailCursor,
  readEmailCursor,
  settleEmailClaim,
} from '../../shared/coordination/emailCursor';
import {
  interactionLogKey,
  logInteraction,
  readInteractionDay,
} from '../../shared/coordination/interactionLog';
import { addPromise, listPromises, PROMISES_KEY, resolvePromise } from '../../shared/coordination/promises';
import { addWatchedChats, readWatchedChats, WATCHED_CHATS_KEY } from '../../shared/coordination/watchedChats';
import { ConflictError, InvalidArgumentError, NotFoundError } from '../../shared/protocol/errors';
import type { KeyValueStore } from '../../shared/storage/keyValueStore';
import { BACKENDS, FaultyStore, realStores } from '../support/coordinationSupport';

/**
 * The coordination state over real stores (a temp folder and the run's Azurite), with faults
 * injected only where a real store cannot produce them on demand.
 */

const T0 = '2026-11-29T21:00:00.000Z';
const T1 = '2026-11-29T21:01:00.000Z';
const T2 = '2026-11-29T21:02:00.000Z';

const text = async (store: KeyValueStore, key: string) => (await store.read(key))?.value.toString() ?? null;
const put = (store: KeyValueStore, key: string, value: string) => store.write(key, Buffer.from(value));

/** Before every write of `key`, another writer changes it for real, so our conditional write loses. */
function competingWrites(key: string, value: (n: number) => string) {
  return (store: KeyValueStore) =>
    new FaultyStore(store, {
      beforeWrite: async (written, n) => {
        if (written === key) await store.write(key, Buffer.from(value(n)));
      },
    });
}

describe.each(BACKENDS)('coordination state on the %s backend', (backend) => {
  const newStore = () => realStores(backend).forTenant(`t-${randomUUID().slice(0, 8)}`);

  describe('email cursor', () => {
    const claim = (request: Partial<EmailClaimRequest> & { etag: string }): EmailClaimRequest => ({
      newCursor: T1,
      claimId: 'c1',
      priorClaims: [],
      ...request,
    });

    it('is absent, then present at "now" after a create-only init that later calls cannot repeat', async () => {
      const store = newStore();
      expect(await readEmailCursor(store)).toEqual({
        outcome: 'absent',
        cursor: null,
        etag: null,
        recentClaims: [],
        pendingWindows: [],
      });
      expect(await initializeEmailCursor(store, T0)).toBe('created');
      const read = await readEmailCursor(store);
      expect(read).toMatchObject({ outcome: 'present', cursor: T0, recentClaims: [] });
      expect(read.etag).toMatch(/^".+"$/);
      expect(await initializeEmailCursor(store, T2)).toBe('exists');
      expect((await readEmailCursor(store)).cursor).toBe(T0);
    });

    it('lets exactly one of eight concurrent inits create the cursor', async () => {
      const store = newStore();
      const outcomes = await Promise.all(
        Array.from({ length: 8 }, (_, i) => initializeEmailCursor(store, `2026-11-29T21:00:0${i}.000Z`)),
      );
      expect(outcomes.filter((o) => o === 'created')).toHaveLength(1);
      expect(outcomes.filter((o) => o === 'exists')).toHaveLength(7);
    });

    it('reads a bare RFC 3339 timestamp as present, and anything else as unresolved, never absent', async () => {
      const store = newStore();
      await put(store, EMAIL_CURSOR_KEY, '2026-04-17T10:00:15.261Z\n');
      expect(await readEmailCursor(store)).toMatchObject({
        outcome: 'present',
        cursor: '2026-04-17T10:00:15.261Z',
        recentClaims: [],
      });
      for (const value of [
        'yesterday',
        '2026-02-30T00:00:00Z',
        '2026-11-29 21:00',
        '{"cursor":"soon"}',
        `{"cursor":"${T0}","unknownField":1}`,
        '[]',
        '',
      ]) {
        await put(store, EMAIL_CURSOR_KEY, value);
        expect((await readEmailCursor(store)).outcome, value).toBe('unresolved');
      }
      const failing = new FaultyStore(store, { failReads: () => true });
      expect(await readEmailCursor(failing)).toMatchObject({
        outcome: 'unresolved',
        cursor: null,
        etag: null,
      });
    });

    it('claims with one conditional write: won moves the cursor, a stale ETag loses, nothing is retried', async () => {
      const store = newStore();
      await initializeEmailCursor(store, T0);
      const { etag } = await readEmailCursor(store);
      expect(await claimEmailWindow(store, claim({ etag: etag ?? '' }))).toBe('won');
      expect(await readEmailCursor(store)).toMatchObject({ cursor: T1, recentClaims: ['c1'] });
      // Another instance read the same version: it is told lost, and the cursor stays ours.
      expect(await claimEmailWindow(store, claim({ etag: etag ?? '', newCursor: T2, claimId: 'c2' }))).toBe(
        'lost',
      );
      expect(await readEmailCursor(store)).toMatchObject({ cursor: T1, recentClaims: ['c1'] });

      // A conflict at the write itself: one attempt only.
      const fresh = await readEmailCursor(store);
      const racing = competingWrites(EMAIL_CURSOR_KEY, () => `${T2}\n`)(store);
      expect(
        await claimEmailWindow(racing, claim({ etag: fresh.etag ?? '', claimId: 'c3', priorClaims: ['c1'] })),
      ).toBe('lost');
      expect(racing.writesTo(EMAIL_CURSOR_KEY)).toBe(1);
      expect((await readEmailCursor(store)).cursor).toBe(T2);
    });

    it('fails a claim on a cursor it cannot read or understand, writing nothing', async () => {
      const store = newStore();
      await put(store, EMAIL_CURSOR_KEY, 'garbage');
      const stored = await store.read(EMAIL_CURSOR_KEY);
      const request = claim({ etag: stored?.etag ?? '' });
      const watched = new FaultyStore(store);
      expect(await claimEmailWindow(watched, request)).toBe('failed');
      expect(await claimEmailWindow(new FaultyStore(store, { failReads: () => true }), request)).toBe(
        'failed',
      );
      expect(watched.writesTo(EMAIL_CURSOR_KEY)).toBe(0);
      expect(await store.read(EMAIL_CURSOR_KEY)).toEqual(stored);
    });

    it('settles a timed-out claim whose write landed as ours', async () => {
      const store = newStore();
      await initializeEmailCursor(store, T0);
      const { etag } = await readEmailCursor(store);
      const request = claim({ etag: etag ?? '', priorClaims: ['c0'] });
      const timingOut = new FaultyStore(store, { landThenTimeout: (key) => key === EMAIL_CURSOR_KEY });
      expect(await claimEmailWindow(timingOut, request)).toBe('unknown');
      expect(await settleEmailClaim(store, request)).toBe(true);
      expect(await readEmailCursor(store)).toMatchObject({ cursor: T1, recentClaims: ['c0', 'c1'] });
    });

    it('settles a claim that never landed by retrying the identical write, once', async () => {
      const store = newStore();
      await initializeEmailCursor(store, T0);
      const { etag } = await readEmailCursor(store);
      const request = claim({ etag: etag ?? '' });
      const dropping = new FaultyStore(store, { failWrites: (_key, n) => n === 1 });
      expect(await claimEmailWindow(dropping, request)).toBe('unknown');
      expect((await readEmailCursor(store)).cursor).toBe(T0);
      expect(await settleEmailClaim(dropping, request)).toBe(true);
      expect(dropping.writesTo(EMAIL_CURSOR_KEY)).toBe(2);
      expect(await readEmailCursor(store)).toMatchObject({ cursor: T1, recentClaims: ['c1'] });
      // The original can no longer commit: its If-Match is stale.
      expect(await claimEmailWindow(store, request)).toBe('lost');
    });

    it('settles as lost when the cursor moved without our claim, and null when it cannot tell', async () => {
      const store = newStore();
      await initializeEmailCursor(store, T0);
      const { etag } = await readEmailCursor(store);
      const ours = claim({ etag: etag ?? '', claimId: 'ours' });
      expect(await claimEmailWindow(store, claim({ etag: etag ?? '', claimId: 'theirs' }))).toBe('won');
      expect(await settleEmailClaim(store, ours)).toBe(false);
      expect(await settleEmailClaim(new FaultyStore(store, { failReads: () => true }), ours)).toBeNull();
      await put(store, EMAIL_CURSOR_KEY, 'garbage');
      expect(await settleEmailClaim(store, ours)).toBeNull();
      await store.delete(EMAIL_CURSOR_KEY);
      expect(await settleEmailClaim(store, ours)).toBeNull();
    });

    it('keeps the 16 most recent claim ids and carries pending windows over', async () => {
      const store = newStore();
      const pending = [{ from: T0, to: T1, claimId: 'w1', leaseExpires: T2 }];
      await put(
        store,
        EMAIL_CURSOR_KEY,
        JSON.stringify({ cursor: T1, recentClaims: [], pendingWindows: pending }),
      );
      const { etag } = await readEmailCursor(store);
      const prior = Array.from({ length: 20 }, (_, i) => `p${i}`);
      expect(
        await claimEmailWindow(store, claim({ etag: etag ?? '', newCursor: T2, priorClaims: prior })),
      ).toBe('won');
      const read = await readEmailCursor(store);
      expect(read.recentClaims).toEqual([...prior.slice(5), 'c1']);
      expect(read.pendingWindows).toEqual(pending);
      expect(JSON.parse((await text(store, EMAIL_CURSOR_KEY)) ?? '')).toEqual({
        cursor: T2,
        recentClaims: [...prior.slice(5), 'c1'],
        pendingWindows: pending,
      });
    });
  });

  describe('watched chats', () => {
    it('merges with create-only first, reports what it added, and writes nothing when nothing is new', async () => {
      const store = new FaultyStore(newStore());
      expect(await readWatchedChats(store)).toEqual({ outcome: 'absent', chatIds: [], etag: null });
      expect(await addWatchedChats(store, ['19:a@thread.v2', '19:b@thread.v2', '19:a@thread.v2'])).toEqual({
        persisted: true,
        added: ['19:a@thread.v2', '19:b@thread.v2'],
      });
      expect(await addWatchedChats(store, ['19:b@thread.v2', '19:c@thread.v2'])).toEqual({
        persisted: true,
        added: ['19:c@thread.v2'],
      });
      const read = await readWatchedChats(store);
      expect(read).toMatchObject({
        outcome: 'present',
        chatIds: ['19:a@thread.v2', '19:b@thread.v2', '19:c@thread.v2'],
      });
      expect(read.etag).toMatch(/^".+"$/);
      const writes = store.writesTo(WATCHED_CHATS_KEY);
      expect(await addWatchedChats(store, ['19:c@thread.v2'])).toEqual({ persisted: true, added: [] });
      expect(store.writesTo(WATCHED_CHATS_KEY)).toBe(writes);
    });

    it('drops entries that cannot be chat ids on read', async () => {
      const store = newStore();
      await put(
        store,
        WATCHED_CHATS_KEY,
        JSON.stringify([
          '19:ok@thread.v2',
          'has space',
          'a/b',
          'a\\b',
          'q?',
          'h#',
          'p%20',
          'c\u0007',
          5,
          null,
          'ok2',
        ]),
      );
      expect((await readWatchedChats(store)).chatIds).toEqual(['19:ok@thread.v2', 'ok2']);
    });

    it('never overwrites a list it cannot read or understand, and never throws', async () => {
      const store = newStore();
      await put(store, WATCHED_CHATS_KEY, '{"not": "a list"}');
      const before = await store.read(WATCHED_CHATS_KEY);
      expect(await readWatchedChats(store)).toMatchObject({ outcome: 'unresolved', chatIds: [], etag: null });
      expect(await addWatchedChats(store, ['19:x@thread.v2'])).toEqual({ persisted: false, added: [] });
      const failing = new FaultyStore(store, { failReads: () => true });
      expect(await addWatchedChats(failing, ['19:x@thread.v2'])).toEqual({ persisted: false, added: [] });
      expect(await store.read(WATCHED_CHATS_KEY)).toEqual(before);
    });

    it("gives up after 4 lost writes with persisted false, keeping the other writer's list", async () => {
      const base = newStore();
      const store = competingWrites(WATCHED_CHATS_KEY, (n) => JSON.stringify([`19:other-${n}@thread.v2`]))(
        base,
      );
      expect(await addWatchedChats(store, ['19:mine@thread.v2'])).toEqual({ persisted: false, added: [] });
      expect(store.writesTo(WATCHED_CHATS_KEY)).toBe(4);
      expect((await readWatchedChats(base)).chatIds).toEqual(['19:other-4@thread.v2']);
    });

    it('loses no id that a concurrent merge reported as persisted', async () => {
      const store = newStore();
      const results = await Promise.all(
        Array.from({ length: 6 }, (_, i) => addWatchedChats(store, [`19:c${i}@thread.v2`])),
      );
      const listed = (await readWatchedChats(store)).chatIds;
      for (const [i, result] of results.entries()) {
        if (result.persisted) expect(listed).toContain(`19:c${i}@thread.v2`);
      }
      expect(results.some((result) => result.persisted)).toBe(true);
    });
  });

  describe('chat cursors and claimDelivery', () => {
    const CHAT = '19:c@thread.v2';
    const ids = (from: number, count: number) =>
      Array.from({ length: count }, (_, i) => String(1_764_450_000_000 + from + i));

    it('stores the cursor at the percent-encoded key, in the stored shape', async () => {
      const store = newStore();
      const claim = await claimDelivery(store, CHAT, ['2', '1'], {
        lastTs: '2026-04-17T10:00:15Z',
        now: () => new Date(T0),
      });
      expect(claim).toEqual({ claimed: ['2', '1'], reason: null, attempts: 1 });
      expect(chatCursorKey(CHAT)).toBe('chat_cursors/19%3Ac%40thread.v2.json');
      expect(JSON.parse((await text(store, 'chat_cursors/19%3Ac%40thread.v2.json')) ?? '')).toEqual({
        last_ts: '2026-04-17T10:00:15Z',
        seen_ids_tail: ['1', '2'],
        bootstrapped: true,
        last_written_at: T0,
      });
      // The later lastTs is kept, compared as instants (…15.261Z is after …15Z).
      await claimDelivery(store, CHAT, ['3'], { lastTs: '2026-04-17T10:00:15.261Z' });
      await claimDelivery(store, CHAT, ['4'], { lastTs: '2026-04-17T09:00:00Z' });
      expect((await resolveChatCursor(store, CHAT)).cursor?.lastTs).toBe('2026-04-17T10:00:15.261Z');
    });

    it('lets exactly one of two first claims on an absent cursor win (create-only)', async () => {
      const store = newStore();
      const [a, b] = await Promise.all([
        claimDelivery(store, CHAT, ['m1', 'm2']),
        claimDelivery(store, CHAT, ['m1', 'm2']),
      ]);
      expect([...(a?.claimed ?? []), ...(b?.claimed ?? [])].sort()).toEqual(['m1', 'm2']);
      expect([a?.claimed.length, b?.claimed.length].sort()).toEqual([0, 2]);
    });

    it('hands each of 40 ids to exactly one of 16 concurrent claimers', async () => {
      const store = newStore();
      const offered = ids(0, 40);
      const claimed: string[] = [];
      // Each claimer offers its own shuffled half, and claims again after contention, as a poller would.
      await Promise.all(
        Array.from({ length: 16 }, async (_, claimer) => {
          const mine = offered.filter((_, i) => (i + claimer) % 2 === 0 || claimer % 4 === 0);
          for (let round = 0; round < 10; round++) {
            const result = await claimDelivery(store, CHAT, mine);
            claimed.push(...result.claimed);
            if (result.reason === null) break;
          }
        }),
      );
      expect(claimed.sort()).toEqual(offered);
    });

    it('keeps the 50 largest ids and never claims an id below a full tail', async () => {
      const store = newStore();
      expect((await claimDelivery(store, CHAT, ids(0, 60))).claimed).toEqual(ids(0, 60));
      const cursor = (await resolveChatCursor(store, CHAT)).cursor;
      expect(cursor?.seenIdsTail).toEqual(ids(10, 50));
      // ids(0, 10) were pushed out of the tail: they are old, so they stay delivered.
      expect((await claimDelivery(store, CHAT, [...ids(0, 10), ...ids(60, 1)])).claimed).toEqual(ids(60, 1));
    });

    it('treats a stale cursor as present: what it has seen is not delivered again', async () => {
      const store = newStore();
      const writtenAt = new Date(Date.now() - 2 * 24 * 60 * 60 * 1000).toISOString();
      await put(
        store,
        chatCursorKey(CHAT),
        JSON.stringify({
          last_ts: T0,
          seen_ids_tail: ['m1'],
          bootstrapped: true,
          last_written_at: writtenAt,
        }),
      );
      const read = await resolveChatCursor(store, CHAT);
      expect(read.outcome).toBe('present');
      expect(read.cursor !== null && isCursorStale(read.cursor)).toBe(true);
      expect((await claimDelivery(store, CHAT, ['m1', 'm2'])).claimed).toEqual(['m2']);
      const after = await resolveChatCursor(store, CHAT);
      expect(after.cursor !== null && isCursorStale(after.cursor)).toBe(false);
    });

    it('claims nothing from a corrupt or unreadable cursor, and leaves it as it is', async () => {
      const store = newStore();
      for (const value of ['not json', '[1,2]', '"x"', '{"seen_ids_tail":"m1"}', '{"last_ts":"x"}']) {
        await put(store, chatCursorKey(CHAT), value);
        const before = await store.read(chatCursorKey(CHAT));
        expect(await resolveChatCursor(store, CHAT), value).toMatchObject({
          outcome: 'unresolved',
          cursor: null,
        });
        expect(await claimDelivery(store, CHAT, ['m1']), value).toEqual({
          claimed: [],
          reason: 'unresolved',
          attempts: 0,
        });
        expect(await store.read(chatCursorKey(CHAT))).toEqual(before);
      }
      const failing = new FaultyStore(newStore(), { failReads: () => true });
      expect(await claimDelivery(failing, CHAT, ['m1'])).toMatchObject({ claimed: [], reason: 'unresolved' });
      expect(failing.writesTo(chatCursorKey(CHAT))).toBe(0);
    });

    it('claims nothing when the write may have landed, and never hands those ids out again', async () => {
      const store = newStore();
      const timingOut = new FaultyStore(store, { landThenTimeout: () => true });
      expect(await claimDelivery(timingOut, CHAT, ['m1'])).toMatchObject({
        claimed: [],
        reason: 'unresolved',
      });
      expect(await claimDelivery(store, CHAT, ['m1'])).toEqual({ claimed: [], reason: null, attempts: 0 });
    });

    it('reports contention after 4 lost writes, having written nothing of its own', async () => {
      const base = newStore();
      await claimDelivery(base, CHAT, ['m0']);
      const store = competingWrites(chatCursorKey(CHAT), (n) =>
        JSON.stringify({
          last_ts: null,
          seen_ids_tail: [`other-${n}`],
          bootstrapped: true,
          last_written_at: T0,
        }),
      )(base);
      expect(await claimDelivery(store, CHAT, ['m1'])).toEqual({
        claimed: [],
        reason: 'contention',
        attempts: 4,
      });
      expect(store.writesTo(chatCursorKey(CHAT))).toBe(4);
      expect((await resolveChatCursor(base, CHAT)).cursor?.seenIdsTail).toEqual(['other-4']);
    });

    it('never claims twice through a stale cached version', async () => {
      const store = newStore();
      const cache = new ChatCursorCache().forTenant('t');
      expect((await claimDelivery(store, CHAT, ['m1'], { cache })).claimed).toEqual(['m1']);
      // Another instance (no cache) claims m2 meanwhile: our cached version is now stale.
      expect((await claimDelivery(store, CHAT, ['m2'])).claimed).toEqual(['m2']);
      const watched = new FaultyStore(store);
      expect(await claimDelivery(watched, CHAT, ['m2', 'm3'], { cache })).toEqual({
        claimed: ['m3'],
        reason: null,
        attempts: 2,
      });
      // With a current cached version the claim is a single write and no read.
      const reads = new FaultyStore(store, { failReads: () => true });
      expect(await claimDelivery(reads, CHAT, ['m4'], { cache })).toMatchObject({
        claimed: ['m4'],
        attempts: 1,
      });
    });
  });

  describe('promises', () => {
    it('adds, lists, and resolves idempotently (the second resolve writes nothing)', async () => {
      const store = newStore();
      const now = new Date(T0);
      const promise = await addPromise(
        store,
        { chatId: '19:c@thread.v2', description: '  send the report ' },
        now,
      );
      expect(promise).toEqual({
        id: expect.stringMatching(/^[0-9a-f]{32}$/) as string,
        createdAt: T0,
        chatId: '19:c@thread.v2',
        description: 'send the report',
        dueBy: null,
        status: 'open',
      });
      expect(await listPromises(store, 'open')).toEqual([promise]);
      const resolved = await resolvePromise(store, promise.id, 'sent', new Date(T1));
      expect(resolved).toEqual({ ...promise, status: 'resolved', resolvedAt: T1, resolution: 'sent' });
      expect(await listPromises(store, 'open')).toEqual([]);
      expect(await listPromises(store, 'all')).toEqual([resolved]);
      const before = await store.read(PROMISES_KEY);
      expect(await resolvePromise(store, promise.id, 'again', new Date(T2))).toEqual(resolved);
      expect((await store.read(PROMISES_KEY))?.etag).toBe(before?.etag);
      // The stored line shape: one line per version, snake_case, absent fields left out.
      const lines = ((await text(store, PROMISES_KEY)) ?? '')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as unknown);
      expect(lines).toEqual([
        {
          id: promise.id,
          created_at: T0,
          chat_id: '19:c@thread.v2',
          description: 'send the report',
          status: 'open',
        },
        {
          id: promise.id,
          created_at: T0,
          chat_id: '19:c@thread.v2',
          description: 'send the report',
          status: 'resolved',
          resolved_at: T1,
          resolution: 'sent',
        },
      ]);
    });

    it('refuses blank fields and unknown ids, writing nothing', async () => {
      const store = newStore();
      await expect(addPromise(store, { chatId: ' ', description: 'x' })).rejects.toBeInstanceOf(
        InvalidArgumentError,
      );
      await expect(addPromise(store, { chatId: 'c', description: ' \n' })).rejects.toBeInstanceOf(
        InvalidArgumentError,
      );
      await expect(resolvePromise(store, 'nope', 'done')).rejects.toBeInstanceOf(NotFoundError);
      const { id } = await addPromise(store, { chatId: 'c', description: 'x' });
      await expect(resolvePromise(store, id, '  ')).rejects.toBeInstanceOf(InvalidArgumentError);
      expect((await listPromises(store, 'open')).map((p) => p.id)).toEqual([id]);
    });

    it('never lets two first promises overwrite each other (create-only, then one retry)', async () => {
      const store = newStore();
      const [a, b] = await Promise.all([
        addPromise(store, { chatId: 'c', description: 'a' }),
        addPromise(store, { chatId: 'c', description: 'b' }),
      ]);
      expect((await listPromises(store, 'all')).map((p) => p.id).sort()).toEqual([a.id, b.id].sort());
    });

    it('retries once on a conflict, then answers ConflictError with nothing of its own written', async () => {
      const base = newStore();
      await addPromise(base, { chatId: 'c', description: 'first' });
      const original = (await text(base, PROMISES_KEY)) ?? '';
      let competing = 0;
      const once = new FaultyStore(base, {
        beforeWrite: async (key) => {
          if (key === PROMISES_KEY && competing++ === 0) await put(base, PROMISES_KEY, original);
        },
      });
      const second = await addPromise(once, { chatId: 'c', description: 'second' });
      expect(once.writesTo(PROMISES_KEY)).toBe(2);
      expect((await listPromises(base, 'open')).map((p) => p.description)).toEqual(['first', 'second']);

      const both = (await text(base, PROMISES_KEY)) ?? '';
      const always = competingWrites(PROMISES_KEY, () => both)(base);
      await expect(addPromise(always, { chatId: 'c', description: 'third' })).rejects.toBeInstanceOf(
        ConflictError,
      );
      await expect(resolvePromise(always, second.id, 'x')).rejects.toBeInstanceOf(ConflictError);
      expect(always.writesTo(PROMISES_KEY)).toBe(4);
      expect(await text(base, PROMISES_KEY)).toBe(both);
    });

    it('skips corrupt lines and folds by id, the last line winning', async () => {
      const store = newStore();
      const line = (status: string, description: string) =>
        JSON.stringify({ id: 'p1', created_at: T0, chat_id: 'c', description, status });
      await put(
        store,
        PROMISES_KEY,
        [line('open', 'v1'), '{broken', '', '{"no":"id"}', line('open', 'v2')].join('\n'),
      );
      expect((await listPromises(store, 'all')).map((p) => p.description)).toEqual(['v2']);
      // Appending after a file without a final newline keeps lines apart.
      await addPromise(store, { chatId: 'c', description: 'v3' });
      expect((await listPromises(store, 'all')).map((p) => p.description)).toEqual(['v2', 'v3']);
    });

    it('compacts at 1000 entries: open kept, resolved kept 30 days, one line per promise', async () => {
      const store = newStore();
      const now = new Date('2026-11-29T00:00:00.000Z');
      const day = 24 * 60 * 60 * 1000;
      const at = (daysAgo: number) => new Date(now.getTime() - daysAgo * day).toISOString();
      const lines: string[] = [];
      const entry = (id: string, extra: Record<string, string>) =>
        lines.push(JSON.stringify({ id, created_at: at(90), chat_id: 'c', description: id, ...extra }));
      for (let i = 0; i < 400; i++) entry(`open${i}`, { status: 'open' });
      for (let i = 0; i < 300; i++) {
        entry(`old${i}`, { status: 'open' });
        entry(`old${i}`, { status: 'resolved', resolved_at: at(40), resolution: 'r' });
      }
      entry('recent', { status: 'open' });
      entry('recent', { status: 'resolved', resolved_at: at(10), resolution: 'r' });
      entry('baddate', { status: 'resolved', resolved_at: 'last week', resolution: 'r' });
      lines.push('corrupt line');
      expect(lines.filter((l) => l.startsWith('{'))).toHaveLength(1003);
      // 997 valid entries: the first add leaves 998, the second 999; below the mark, no compaction.
      await put(store, PROMISES_KEY, lines.slice(0, 997).join('\n') + '\n');
      await addPromise(store, { chatId: 'c', description: 'a' }, now);
      await addPromise(store, { chatId: 'c', description: 'b' }, now);
      expect(((await text(store, PROMISES_KEY)) ?? '').trim().split('\n')).toHaveLength(999);
      // The 1000th entry compacts: 400 open, old298 (still open), a, b, c; old0-old297 resolved 40 days ago.
      await addPromise(store, { chatId: 'c', description: 'c' }, now);
      expect(((await text(store, PROMISES_KEY)) ?? '').trim().split('\n')).toHaveLength(404);

      await put(store, PROMISES_KEY, lines.join('\n') + '\n');
      const added = await addPromise(store, { chatId: 'c', description: 'new' }, now);
      const stored = ((await text(store, PROMISES_KEY)) ?? '').trim().split('\n');
      const all = await listPromises(store, 'all');
      expect(stored).toHaveLength(all.length);
      expect(all.filter((p) => p.id.startsWith('open'))).toHaveLength(400);
      expect(all.filter((p) => p.id.startsWith('old'))).toHaveLength(0);
      expect(all.map((p) => p.id)).toEqual(expect.arrayContaining(['recent', added.id]));
      expect(all.map((p) => p.id)).not.toContain('baddate');
    });
  });

  describe('interaction log', () => {
    it('appends to the UTC day of the write and reads a day back, skipping corrupt lines', async () => {
      const store = newStore();
      const late = await logInteraction(
        store,
        { channel: 'teams', direction: 'inbound', sender: 'ada', summary: ' hello ', contentRef: 'msg/1' },
        new Date('2026-04-16T23:45:00.000Z'),
      );
      const early = await logInteraction(
        store,
        { channel: 'email', direction: 'outbound', sender: 'bot', summary: 'reply', metadata: { n: 1 } },
        new Date('2026-04-17T00:15:00.000Z'),
      );
      expect(late).toEqual({
        id: expect.any(String) as string,
        ts: '2026-04-16T23:45:00.000Z',
        channel: 'teams',
        direction: 'inbound',
        sender: 'ada',
        summary: 'hello',
        contentRef: 'msg/1',
      });
      await store.append(interactionLogKey('2026-04-16'), Buffer.from('{not json\n[1]\n{"id":"x"}\n'));
      expect(await readInteractionDay(store, '2026-04-16')).toEqual([late]);
      expect(await readInteractionDay(store, '2026-04-17')).toEqual([early]);
      expect(await readInteractionDay(store, '2026-04-18')).toEqual([]);
      expect(
        JSON.parse((await text(store, interactionLogKey('2026-04-16')))?.split('\n')[0] ?? ''),
      ).toMatchObject({
        content_ref: 'msg/1',
      });
    });

    it('keeps every one of 20 concurrent entries', async () => {
      const store = newStore();
      const now = new Date(T0);
      const written = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          logInteraction(store, { channel: 'c', direction: 'inbound', sender: 's', summary: `n${i}` }, now),
        ),
      );
      const read = await readInteractionDay(store, '2026-11-29');
      expect(read.map((entry) => entry.id).sort()).toEqual(written.map((entry) => entry.id).sort());
    });

    it('refuses a blank channel or summary and an unknown direction, writing nothing', async () => {
      const store = newStore();
      const base = { channel: 'c', direction: 'inbound' as const, sender: 's', summary: 'x' };
      for (const bad of [
        { ...base, channel: ' ' },
        { ...base, summary: '\t' },
        { ...base, direction: 'sideways' as 'inbound' },
      ]) {
        await expect(logInteraction(store, bad, new Date(T0))).rejects.toBeInstanceOf(InvalidArgumentError);
      }
      expect(await readInteractionDay(store, '2026-11-29')).toEqual([]);
    });
  });
});
