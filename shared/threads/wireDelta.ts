import { createHash } from 'node:crypto';

import type { z } from 'zod';

import { lru } from '../lru';
import { BaseMismatchError, NotFoundError } from '../protocol/errors';
import type { putCheckpointBody } from '../protocol/threads';
import type { TypedBytes } from './records';
import type { CheckpointTuple } from './threadTypes';

/**
 * Values sent as deltas (docs/threads.md, Deltas): a put may give a channel value as the first
 * `keep` bytes of a value the thread holds (`base`) and the bytes to `append`; a read given
 * `since` may answer a value as such a change to the value of the same channel at `since`. The
 * base is read through the thread store's reads, for the caller's tenant, thread and namespace
 * only, and every result is checked against the SHA-256 the sender computed: a delta that does not
 * resolve is refused (409 `base_mismatch`), never stored.
 */

type PutBody = z.infer<typeof putCheckpointBody>;
type PutValue = PutBody['values'][string];
type DeltaPut = Extract<NonNullable<PutValue>, { base: unknown }>;

/** Reads a checkpoint of the caller's thread and namespace (the thread store's `getCheckpoint`). */
export type CheckpointRead = (checkpointId: string) => Promise<CheckpointTuple>;

export function sha256Hex(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}

function isDelta(value: PutValue): value is DeltaPut {
  return value !== null && 'base' in value;
}

/**
 * The put's body with every delta value replaced by the whole value it names. Each base checkpoint
 * is read once; a base that is not stored, a channel it has no value for, another type tag, a
 * `keep` past its end or a result whose digest is not `sha256` is a {@link BaseMismatchError}
 * naming `values.<channel>`.
 */
export async function resolvePutDeltas(
  body: PutBody,
  read: CheckpointRead,
  cached: (checkpointId: string) => Readonly<Record<string, TypedBytes>> | undefined = () => undefined,
): Promise<PutBody & { values: Record<string, { type: string; data: string } | null> }> {
  const deltas = Object.entries(body.values).filter((entry): entry is [string, DeltaPut] =>
    isDelta(entry[1]),
  );
  if (deltas.length === 0)
    return body as PutBody & { values: Record<string, { type: string; data: string } | null> };
  const bases = new Map<string, Promise<CheckpointTuple | null>>();
  const baseOf = (checkpointId: string) => {
    let found = bases.get(checkpointId);
    if (found === undefined) {
      found = read(checkpointId).catch((error: unknown) => {
        if (error instanceof NotFoundError) return null;
        throw error;
      });
      bases.set(checkpointId, found);
    }
    return found;
  };
  const resolved: Record<string, { type: string; data: string } | null> = {};
  for (const [channel, value] of Object.entries(body.values)) {
    Object.defineProperty(resolved, channel, { value, enumerable: true, writable: true });
  }
  for (const [channel, delta] of deltas) {
    const field = `values.${channel}`;
    const baseChannel = delta.base.channel ?? channel;
    const known = cached(delta.base.checkpointId);
    let base: TypedBytes | undefined =
      known !== undefined && Object.hasOwn(known, baseChannel) ? known[baseChannel] : undefined;
    if (base === undefined) {
      const tuple = await baseOf(delta.base.checkpointId);
      if (tuple === null) {
        throw new BaseMismatchError(
          field,
          `the base checkpoint ${delta.base.checkpointId} is not stored in the namespace`,
        );
      }
      base = Object.hasOwn(tuple.values, baseChannel) ? tuple.values[baseChannel] : undefined;
    }
    if (base === undefined)
      throw new BaseMismatchError(field, 'the base checkpoint has no value for the channel');
    if (base.type !== delta.type) throw new BaseMismatchError(field, 'the base value has another type tag');
    if (delta.keep > base.data.length)
      throw new BaseMismatchError(field, '`keep` is past the end of the base value');
    const data = Buffer.concat([base.data.subarray(0, delta.keep), Buffer.from(delta.append, 'base64')]);
    if (sha256Hex(data) !== delta.sha256) {
      throw new BaseMismatchError(field, 'the value the delta makes does not have the digest `sha256`');
    }
    Object.defineProperty(resolved, channel, {
      value: { type: delta.type, data: data.toString('base64') },
      enumerable: true,
      writable: true,
    });
  }
  return { ...body, values: resolved };
}

/** The length of the longest common prefix of two byte strings. */
export function commonPrefix(a: Uint8Array, b: Uint8Array): number {
  const length = Math.min(a.length, b.length);
  let index = 0;
  while (index < length && a[index] === b[index]) index += 1;
  return index;
}

export interface ValueDeltaOut {
  readonly type: string;
  readonly keep: number;
  readonly append: Buffer;
  readonly sha256: string;
}

/**
 * A value as the read answers it against the value of the same channel at `since`: a delta when
 * that value has the same tag and the delta is smaller than the whole value, else the value whole.
 */
export function deltaAgainst(value: TypedBytes, known: TypedBytes | undefined): TypedBytes | ValueDeltaOut {
  if (known === undefined || known.type !== value.type) return value;
  const keep = commonPrefix(known.data, value.data);
  // The digest and the framing cost about 100 bytes: below that a value travels whole.
  if (value.data.length - keep + 100 >= value.data.length) return value;
  return { type: value.type, keep, append: value.data.subarray(keep), sha256: sha256Hex(value.data) };
}

/** The values of a checkpoint this instance answered or stored, by channel (some or all of them). */
type KnownValuesEntry = Readonly<Record<string, TypedBytes>>;

/** Bytes of values each thread store's {@link KnownValues} keeps at most. */
const KNOWN_VALUES_BYTES = 16 * 1024 * 1024;

/**
 * The values of checkpoints this instance stored or answered lately, so that resolving a delta
 * put's base or a read's `since` (most often the checkpoint the same client just wrote or read)
 * costs no storage request. A checkpoint's values never change while it is stored, and whatever
 * this cache answers is still checked: a put's result against the digest its sender computed, a
 * read's against the digest the client checks. A value missing here is read from the store.
 * Entries of a deleted thread are dropped (so a base no one can read is refused, as without the
 * cache); bounded by bytes, least recently used dropped first.
 */
export class KnownValues {
  private readonly entries = lru<string, KnownValuesEntry>(4096, {
    limit: KNOWN_VALUES_BYTES,
    of: (values) => Object.values(values).reduce((sum, value) => sum + value.data.length + 64, 0),
  });

  private static keyOf(tenant: string, threadId: string, ns: string, checkpointId: string): string {
    return `${tenant}\n${threadId}\n${ns}\n${checkpointId}`;
  }

  get(tenant: string, threadId: string, ns: string, checkpointId: string): KnownValuesEntry | undefined {
    return this.entries.get(KnownValues.keyOf(tenant, threadId, ns, checkpointId));
  }

  /** Keeps `values` of a checkpoint (merged with what is known of it already). */
  remember(
    tenant: string,
    threadId: string,
    ns: string,
    checkpointId: string,
    values: Readonly<Record<string, TypedBytes | null>>,
  ): void {
    const key = KnownValues.keyOf(tenant, threadId, ns, checkpointId);
    // Channel names are the caller's (`__proto__` included): defined, never assigned.
    const merged: Record<string, TypedBytes> = {};
    const keep = (channel: string, value: TypedBytes) =>
      Object.defineProperty(merged, channel, { value, enumerable: true, writable: true, configurable: true });
    for (const [channel, value] of Object.entries(this.entries.get(key) ?? {})) keep(channel, value);
    for (const [channel, value] of Object.entries(values)) if (value !== null) keep(channel, value);
    this.entries.set(key, merged);
  }

  /** Drops every entry of a thread (it was deleted). */
  forgetThread(tenant: string, threadId: string): void {
    const prefix = `${tenant}\n${threadId}\n`;
    for (const key of [...this.entries.keys()]) if (key.startsWith(prefix)) this.entries.delete(key);
  }
}

const knownValuesOf = new WeakMap<object, KnownValues>();

/** The {@link KnownValues} of one thread store (one per store, so two stores never share one). */
export function knownValuesFor(store: object): KnownValues {
  let known = knownValuesOf.get(store);
  if (known === undefined) {
    known = new KnownValues();
    knownValuesOf.set(store, known);
  }
  return known;
}
