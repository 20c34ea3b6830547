import { createHash } from 'node:crypto';

import { IntegrityError } from '../protocol/errors';
import { forEachLimited } from '../protocol/pool';
import { listAllItems } from '../retention/deletion';
import type { VerifyPart } from '../retention/parts';
import { type HashSample, sampled, type VerifyCollector } from '../retention/verifyReport';
import type { KeyValueStore, ListedItem, StoredValue } from '../storage/keyValueStore';
import { valueDigest } from './chunks';
import { isName, namespaceSegment } from './identifiers';
import { DATA_PREFIX, keysOf, parseDataKey, THREAD_RECORD_PREFIX } from './layout';
import {
  type CheckpointRecord,
  decodeCheckpointRecord,
  decodeThreadRecord,
  encodeValue,
  isChunkedSource,
  isInlineSource,
  ownValue,
  producerOf,
  type ThreadRecord,
} from './records';
import { MissingValueError, ValueReader } from './valueReader';

/**
 * `cairn verify` for one tenant's threads: every head's checkpoint record is stored, every value a
 * stored record or head names is stored (and, for a sample or with `readData` for all, its bytes
 * match the digest in its key), every pack a value stored by what it adds has segments in is
 * stored (its checkpoint's record, or the pack kept apart once the record went), and for a sample
 * such values are read back from their segments and matched against the keyed digest of their
 * source; everything no thread references is reported as an orphan: values, packs and pending
 * writes no record names, data of incarnations no thread record names.
 */

const READ_CONCURRENCY = 16;

export async function verifyThreads(
  store: KeyValueStore,
  collector: VerifyCollector,
  sample: HashSample,
  options: { readonly sealed?: boolean } = {},
): Promise<void> {
  const data = new Map<string, Map<string, ListedItem[]>>();
  for await (const page of listAllItems(store, DATA_PREFIX)) {
    for (const item of page) {
      const parsed = parseDataKey(item.key);
      if (parsed === null) continue;
      const incarnations = data.get(parsed.threadId) ?? new Map<string, ListedItem[]>();
      const items = incarnations.get(parsed.incarnation) ?? [];
      items.push(item);
      incarnations.set(parsed.incarnation, items);
      data.set(parsed.threadId, incarnations);
    }
  }
  const threadIds: string[] = [];
  for await (const page of listAllItems(store, THREAD_RECORD_PREFIX)) {
    for (const item of page) {
      const threadId = item.key.slice(THREAD_RECORD_PREFIX.length);
      if (isName(threadId)) threadIds.push(threadId);
    }
  }
  await forEachLimited(threadIds, 4, async (threadId) => {
    const stored = await readOpened(store, `${THREAD_RECORD_PREFIX}${threadId}`);
    if (stored === null) return;
    let thread: ThreadRecord;
    try {
      if (stored instanceof IntegrityError) throw stored;
      thread = decodeThreadRecord(stored.value, threadId);
    } catch (error) {
      collector.finding({
        domain: 'threads',
        kind: 'unreadable',
        where: `thread ${threadId}`,
        key: `${THREAD_RECORD_PREFIX}${threadId}`,
        detail: error instanceof Error ? error.message : String(error),
      });
      // Which incarnation it names cannot be told: its data is no orphan (the prune refuses the
      // thread as well, and collects none of it).
      data.delete(threadId);
      return;
    }
    collector.checked.threads += 1;
    const incarnations = data.get(threadId) ?? new Map<string, ListedItem[]>();
    await verifyThread(
      store,
      thread,
      incarnations.get(thread.incarnation) ?? [],
      collector,
      sample,
      options.sealed === true,
    );
    incarnations.delete(thread.incarnation);
  });
  // What is left belongs to no thread record: deleted threads, lost creations.
  for (const incarnations of data.values()) {
    for (const items of incarnations.values()) {
      for (const item of items) collector.orphan('threads', item.key, item.size, item.modifiedAt);
    }
  }
}

async function verifyThread(
  store: KeyValueStore,
  thread: ThreadRecord,
  items: readonly ListedItem[],
  collector: VerifyCollector,
  sample: HashSample,
  sealed: boolean,
): Promise<void> {
  const keys = keysOf(thread);
  const where = `thread ${thread.threadId}`;
  const byKey = new Map(items.map((item) => [item.key, item]));
  const recordKeys = items
    .filter((item) => parseDataKey(item.key)?.item?.kind === 'record')
    .map((i) => i.key);
  const records: CheckpointRecord[] = [];
  await forEachLimited(recordKeys, READ_CONCURRENCY, async (key) => {
    const stored = await readOpened(store, key);
    if (stored === null) return;
    try {
      if (stored instanceof IntegrityError) throw stored;
      records.push(decodeCheckpointRecord(stored.value, key));
    } catch (error) {
      collector.finding({
        domain: 'threads',
        kind: 'unreadable',
        where,
        key,
        detail: error instanceof Error ? error.message : String(error),
      });
    }
  });
  collector.checked.checkpoints += records.length;
  const stored = new Set(records.map((record) => `${namespaceSegment(record.ns)}/${record.id}`));
  for (const head of thread.heads.values()) {
    const key = keys.record(head.record.id, head.record.ns);
    if (!byKey.has(key)) {
      collector.finding({
        domain: 'threads',
        kind: 'dangling_head',
        where,
        key,
        detail: `the head of namespace "${head.record.ns}" is checkpoint ${head.record.id}, whose record is not stored`,
      });
    }
    records.push(head.record);
  }
  const referenced = new Map<string, string>();
  // Values held inline in a stored record are there with it (checked against their digest below);
  // once retention removed that record, they are at their value key like any other value.
  const holders = new Map(
    records
      .filter((record) => record.inline !== undefined)
      .map((record) => [keys.record(record.id, record.ns), record]),
  );
  const inlineHeld = new Set<string>();
  for (const record of records) {
    for (const [channel, source] of Object.entries(record.valueSources)) {
      if (isChunkedSource(source)) continue;
      const key = keys.value(record.ns, source, channel);
      referenced.set(key, `checkpoint ${record.id} channel ${channel}`);
      if (!isInlineSource(source)) continue;
      const holder = holders.get(keys.record(source.slice(0, source.lastIndexOf('/')), record.ns));
      // Only the record whose source it is holds it: a record stored again under a removed
      // record's checkpoint id holds its own value (see ValueReader.inline).
      const bytes =
        holder?.inline === undefined || ownValue(holder.valueSources, channel) !== source
          ? undefined
          : ownValue(holder.inline, channel);
      if (bytes === undefined) continue;
      inlineHeld.add(key);
      const digest = createHash('sha256').update(bytes).digest().subarray(0, 16).toString('base64url');
      if (!sealed && !key.endsWith(`/~${digest}`)) {
        collector.finding({
          domain: 'threads',
          kind: 'wrong_hash',
          where,
          key: keys.record(holder?.id ?? '', record.ns),
          detail: `the bytes of checkpoint ${record.id} channel ${channel} held in its record do not match the digest of its source`,
        });
      }
    }
  }
  await verifyPieces(store, thread, records, byKey, collector, sample);
  const present: string[] = [];
  for (const [key, what] of referenced) {
    if (inlineHeld.has(key) && !byKey.has(key)) continue;
    if (byKey.has(key)) {
      present.push(key);
      continue;
    }
    collector.finding({
      domain: 'threads',
      kind: 'missing',
      where,
      key,
      detail: `the value of ${what} is not stored`,
    });
  }
  collector.checked.values += present.length;
  await forEachLimited(sampled(present, sample), READ_CONCURRENCY, async (key) => {
    let value: StoredValue | null;
    try {
      value = await store.read(key);
    } catch (error) {
      if (!(error instanceof IntegrityError)) throw error;
      collector.finding({
        domain: 'threads',
        kind: 'wrong_hash',
        where,
        key,
        detail: `the stored bytes of ${referenced.get(key) ?? 'a value'} do not open with the encryption keys`,
      });
      return;
    }
    if (value === null) return;
    collector.hashed(value.value.length);
    // Sealed values are named by random bytes, not a digest: opening them (AES-GCM, bound to their
    // key) just checked that they are the bytes stored there.
    if (sealed) return;
    const digest = createHash('sha256').update(value.value).digest().subarray(0, 16).toString('base64url');
    if (!key.endsWith(`/${digest}`) && !key.endsWith(`/~${digest}`)) {
      collector.finding({
        domain: 'threads',
        kind: 'wrong_hash',
        where,
        key,
        detail: `the stored bytes of ${referenced.get(key) ?? 'a value'} do not match the digest in its key`,
      });
    }
  });
  const packs = namedPacks(thread, records);
  for (const item of items) {
    const parsed = parseDataKey(item.key)?.item;
    if (parsed?.kind === 'value' && !referenced.has(item.key)) {
      collector.orphan('threads', item.key, item.size, item.modifiedAt);
    } else if (parsed?.kind === 'pack' && !packs.has(item.key)) {
      collector.orphan('threads', item.key, item.size, item.modifiedAt);
    } else if (parsed?.kind === 'writes' && !stored.has(`${parsed.nsSegment}/${parsed.checkpointId}`)) {
      const head = [...thread.heads.values()].some(
        (entry) =>
          entry.record.id === parsed.checkpointId && namespaceSegment(entry.record.ns) === parsed.nsSegment,
      );
      if (!head) collector.orphan('threads', item.key, item.size, item.modifiedAt);
    }
  }
}

/**
 * The value at `key` (null when absent), or the IntegrityError of one that does not open (a sealed
 * value changed or moved), which is damage to report as `unreadable`, as a record that does not
 * decode is. Storage faults throw: a verification that could not read is no verification.
 */
async function readOpened(store: KeyValueStore, key: string): Promise<StoredValue | IntegrityError | null> {
  try {
    return await store.read(key);
  } catch (error) {
    if (error instanceof IntegrityError) return error;
    throw error;
  }
}

/** The pack keys that the segments of `records` name. */
function namedPacks(thread: ThreadRecord, records: readonly CheckpointRecord[]): Set<string> {
  const keys = keysOf(thread);
  const named = new Set<string>();
  for (const record of records) {
    for (const segments of Object.values(record.pieces ?? {})) {
      for (const [producer] of segments) named.add(keys.pack(record.ns, producer));
    }
  }
  return named;
}

/**
 * Values stored by what they add: each pack a segment names must be stored (its checkpoint's
 * record, or the pack apart); a missing one is reported once, naming every checkpoint that needs
 * it. A sample of the values (all with `readData`) is read back from its segments and matched
 * against the keyed digest its source carries; a mismatch, or a segment outside its pack, names
 * the checkpoints that hold that value.
 */
async function verifyPieces(
  store: KeyValueStore,
  thread: ThreadRecord,
  records: readonly CheckpointRecord[],
  byKey: ReadonlyMap<string, ListedItem>,
  collector: VerifyCollector,
  sample: HashSample,
): Promise<void> {
  const keys = keysOf(thread);
  const where = `thread ${thread.threadId}`;
  const needing = new Map<string, { ns: string; producer: string; users: Set<string> }>();
  const holders = new Map<string, { record: CheckpointRecord; channel: string; users: Set<string> }>();
  for (const record of records) {
    for (const [channel, segments] of Object.entries(record.pieces ?? {})) {
      const source = ownValue(record.valueSources, channel);
      if (source === undefined || !isChunkedSource(source)) continue;
      const user = `checkpoint ${record.id} channel ${channel}`;
      for (const [producer] of segments) {
        const packKey = keys.pack(record.ns, producer);
        const need = needing.get(packKey) ?? { ns: record.ns, producer, users: new Set<string>() };
        need.users.add(user);
        needing.set(packKey, need);
      }
      const value = `${record.ns}\n${source}\n${channel}`;
      const held = holders.get(value) ?? { record, channel, users: new Set<string>() };
      held.users.add(`checkpoint ${record.id}`);
      if (producerOf(source) === record.id) held.record = record;
      holders.set(value, held);
    }
  }
  // A record stored again without its pack (a head retention restored) does not hold it.
  const withPack = new Set(
    records.filter((record) => record.pack !== undefined).map((record) => keys.record(record.id, record.ns)),
  );
  const missing = new Set<string>();
  for (const [packKey, { ns, producer, users }] of needing) {
    if (byKey.has(packKey) || withPack.has(keys.record(producer, ns))) continue;
    missing.add(packKey);
    collector.finding({
      domain: 'threads',
      kind: 'missing',
      where,
      key: packKey,
      detail: `the pack of checkpoint ${producer} is not stored (neither its record nor the pack apart); ${[...users].join(', ')} need it`,
    });
  }
  const chunkKey = thread.chunkKey === undefined ? null : Buffer.from(thread.chunkKey, 'base64');
  const values = [...holders.values()];
  collector.checked.values += values.length;
  const reader = new ValueReader(store, keys);
  const chosen = new Set(
    sampled(
      values.map((_, index) => String(index)),
      sample,
    ),
  );
  await forEachLimited(
    values.filter((_, index) => chosen.has(String(index))),
    READ_CONCURRENCY,
    async ({ record, channel, users }) => {
      const source = ownValue(record.valueSources, channel) ?? '';
      const segments = ownValue(record.pieces ?? {}, channel) ?? [];
      if (segments.some(([producer]) => missing.has(keys.pack(record.ns, producer)))) return;
      let detail: string | null = null;
      try {
        const bytes = encodeValue(await reader.value(record, channel));
        collector.hashed(bytes.length);
        if (chunkKey !== null && !source.endsWith(`/*${valueDigest(chunkKey, bytes)}`)) {
          detail = 'read back from its segments, does not match the keyed digest of its source';
        }
      } catch (error) {
        if (error instanceof MissingValueError) return;
        if (!(error instanceof IntegrityError)) throw error;
        detail = 'cannot be read back from its segments (a pack is damaged or does not open)';
      }
      if (detail !== null) {
        collector.finding({
          domain: 'threads',
          kind: 'wrong_hash',
          where,
          key: keys.record(producerOf(source), record.ns),
          detail: `the value of checkpoint ${producerOf(source)} channel ${channel}, ${detail}; ${[...users].join(', ')} hold it`,
        });
      }
    },
  );
}

/**
 * The threads' part of `cairn verify`, for tenants that store threads: `storeOf` is a tenant's
 * thread space as the thread store reads it; `sealed` when its values are sealed.
 */
export function threadVerifyPart(storeOf: (tenant: string) => KeyValueStore, sealed: boolean): VerifyPart {
  return {
    name: 'threads',
    verify: async (tenant, domains, collector, sample) => {
      if (domains.has('threads')) await verifyThreads(storeOf(tenant), collector, sample, { sealed });
    },
  };
}
