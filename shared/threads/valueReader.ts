import { IntegrityError } from '../protocol/errors';
import type { KeyValueStore } from '../storage/keyValueStore';
import { assemble } from './chunks';
import type { keysOf } from './layout';
import {
  type CheckpointRecord,
  decodeCheckpointRecord,
  decodeValue,
  isChunkedSource,
  isInlineSource,
  ownValue,
  producerOf,
  setOwn,
  type TypedBytes,
} from './records';
import type { ValueCache } from './valueCache';

/** A value a record names is not stored: damage, unless the thread was deleted meanwhile. */
export class MissingValueError extends IntegrityError {}

type ThreadKeys = ReturnType<typeof keysOf>;

/**
 * Reads the values of checkpoints, once per request: values stored apart once each, the records
 * that hold values inline or packs once each (every value and segment of one comes with one
 * read), and a pack whose record retention removed from its pack key.
 */
export class ValueReader {
  private readonly pending = new Map<string, Promise<TypedBytes>>();
  private readonly records = new Map<string, Promise<CheckpointRecord | null>>();
  private readonly packs = new Map<string, Promise<Buffer | null>>();
  bytes = 0;

  /** `cache`: the values kept by this instance, with the scope of the thread (see ValueCache). */
  constructor(
    private readonly store: KeyValueStore,
    private readonly keys: ThreadKeys,
    private readonly cache?: { readonly values: ValueCache; readonly scope: string },
  ) {}

  /** A record already read (its inline values and its pack then cost nothing more). */
  know(record: CheckpointRecord): void {
    const key = this.keys.record(record.id, record.ns);
    if ((record.inline !== undefined || record.pack !== undefined) && !this.records.has(key)) {
      this.records.set(key, Promise.resolve(record));
    }
  }

  /**
   * Every value of `record` (channel → value); with a cache, the record's sources are then kept by
   * its id (see ValueCache.rememberCheckpoint).
   */
  async valuesOf(record: CheckpointRecord): Promise<Record<string, TypedBytes>> {
    this.know(record);
    const channels = Object.keys(record.valueSources);
    const values = await Promise.all(channels.map((channel) => this.value(record, channel)));
    const valueMap: Record<string, TypedBytes> = {};
    channels.forEach((channel, index) => setOwn(valueMap, channel, values[index] as TypedBytes));
    this.cache?.values.rememberCheckpoint(this.cache.scope, record.ns, record.id, record.valueSources);
    return valueMap;
  }

  /** The value of `channel` at `record`, wherever it is stored. */
  value(record: CheckpointRecord, channel: string): Promise<TypedBytes> {
    const source = ownValue(record.valueSources, channel);
    const what = `channel ${channel} of checkpoint ${record.id}`;
    if (source === undefined) return Promise.reject(new MissingValueError(`${what} has no value`));
    if (this.cache === undefined) return this.stored(record, channel, source, what);
    const { values, scope } = this.cache;
    const kept = values.value(scope, record.ns, channel, source);
    if (kept !== undefined) {
      this.bytes += kept.data.length;
      return Promise.resolve(kept);
    }
    return this.stored(record, channel, source, what).then((value) => {
      values.keep(scope, record.ns, channel, source, value);
      return value;
    });
  }

  private stored(
    record: CheckpointRecord,
    channel: string,
    source: string,
    what: string,
  ): Promise<TypedBytes> {
    if (isChunkedSource(source)) return this.chunked(record, channel, what);
    const valueKey = this.keys.value(record.ns, source, channel);
    if (!isInlineSource(source)) return this.read(valueKey, what);
    return this.inline(this.keys.record(producerOf(source), record.ns), valueKey, channel, source, what);
  }

  private read(key: string, what: string): Promise<TypedBytes> {
    let value = this.pending.get(key);
    if (value === undefined) {
      value = this.store.read(key).then((stored) => {
        if (stored === null) throw new MissingValueError(`the stored value of ${what} is missing`);
        this.bytes += stored.value.length;
        return decodeValue(stored.value, what);
      });
      this.pending.set(key, value);
    }
    return value;
  }

  private record(key: string): Promise<CheckpointRecord | null> {
    let record = this.records.get(key);
    if (record === undefined) {
      record = this.store.read(key).then((stored) => {
        if (stored === null) return null;
        this.bytes += stored.value.length;
        return decodeCheckpointRecord(stored.value, key);
      });
      this.records.set(key, record);
    }
    return record;
  }

  /**
   * A value held inline in the record at `recordKey`; once retention removed that record, the
   * value is at `valueKey` (retention put it there first). A record stored there since under the
   * same checkpoint id (a put may store the id again once its record is gone) holds its own value
   * of the channel, under another source: only the record whose source it is holds it.
   */
  private async inline(
    recordKey: string,
    valueKey: string,
    channel: string,
    source: string,
    what: string,
  ): Promise<TypedBytes> {
    const holder = await this.record(recordKey);
    const bytes =
      holder !== null && ownValue(holder.valueSources, channel) === source
        ? ownValue(holder.inline ?? {}, channel)
        : undefined;
    return bytes === undefined ? this.read(valueKey, what) : decodeValue(bytes, what);
  }

  /** A value stored by what it adds: its segments, from the packs of the checkpoints that hold them. */
  private async chunked(record: CheckpointRecord, channel: string, what: string): Promise<TypedBytes> {
    const segments = ownValue(record.pieces ?? {}, channel);
    if (segments === undefined) throw new IntegrityError(`${what} names no pieces`);
    const producers = [...new Set(segments.map(([producer]) => producer))];
    const packs = new Map<string, Buffer>();
    await Promise.all(
      producers.map(async (producer) => {
        packs.set(
          producer,
          producer === record.id && record.pack !== undefined
            ? record.pack
            : await this.pack(record.ns, producer, record.createdAt, what),
        );
      }),
    );
    try {
      return decodeValue(
        assemble(segments, (producer) => packs.get(producer) as Buffer, what),
        what,
      );
    } catch (error) {
      if (error instanceof RangeError) throw new IntegrityError(error.message);
      throw error;
    }
  }

  /**
   * The pack of checkpoint `producer` that a record created at `namedAt` names: in its record, or
   * at its pack key once that record is gone or was stored again without it (a head retention
   * restored from the thread record's copy). A record created after `namedAt` is not the one whose
   * pack was named (a record is never created before the records its segments name, see
   * CheckpointCommits.recordOf): it is another record of the same checkpoint id, stored after
   * retention removed the first and kept its pack apart, so the pack apart is read; only when there
   * is none (a record of a clock that ran ahead, stored before that rule) is the record's own taken.
   */
  private pack(ns: string, producer: string, namedAt: string, what: string): Promise<Buffer> {
    const packKey = this.keys.pack(ns, producer);
    return this.record(this.keys.record(producer, ns)).then(async (record) => {
      if (record?.pack !== undefined && record.createdAt <= namedAt) return record.pack;
      const apart = await this.apart(packKey);
      if (apart !== null) return apart;
      if (record?.pack !== undefined) return record.pack;
      throw new MissingValueError(`the pack of checkpoint ${producer} that ${what} needs is missing`);
    });
  }

  /** The pack stored apart at `packKey`, or null (read once). */
  private apart(packKey: string): Promise<Buffer | null> {
    let pack = this.packs.get(packKey);
    if (pack === undefined) {
      pack = this.store.read(packKey).then((stored) => {
        if (stored === null) return null;
        this.bytes += stored.value.length;
        return stored.value;
      });
      this.packs.set(packKey, pack);
    }
    return pack;
  }
}
