import { createHash } from 'node:crypto';

import type { z } from 'zod';

import { BaseMismatchError } from '../protocol/errors';
import type { putCheckpointBody } from '../protocol/threads';
import type { TypedBytes } from './records';

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

/**
 * A put's body once its deltas are resolved (wireDelta.ts): every value whole or null, as sent
 * (base64) or as the bytes a delta made.
 */
export type ResolvedPutBody = Omit<PutBody, 'values'> & {
  values: Record<string, { type: string; data: string } | TypedBytes | null>;
};

/**
 * The values of a checkpoint of the caller's thread and namespace (the thread store's
 * `checkpointValues`), or null when the namespace does not store it.
 */
export type CheckpointValues = (checkpointId: string) => Promise<Readonly<Record<string, TypedBytes>> | null>;

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
export async function resolvePutDeltas(body: PutBody, read: CheckpointValues): Promise<ResolvedPutBody> {
  const deltas = Object.entries(body.values).filter((entry): entry is [string, DeltaPut] =>
    isDelta(entry[1]),
  );
  if (deltas.length === 0) return body as ResolvedPutBody;
  const bases = new Map<string, Promise<Readonly<Record<string, TypedBytes>> | null>>();
  const baseOf = (checkpointId: string) => {
    let found = bases.get(checkpointId);
    if (found === undefined) {
      found = read(checkpointId);
      bases.set(checkpointId, found);
    }
    return found;
  };
  const resolved: ResolvedPutBody['values'] = {};
  for (const [channel, value] of Object.entries(body.values)) {
    Object.defineProperty(resolved, channel, { value, enumerable: true, writable: true });
  }
  for (const [channel, delta] of deltas) {
    const field = `values.${channel}`;
    const baseChannel = delta.base.channel ?? channel;
    const values = await baseOf(delta.base.checkpointId);
    if (values === null) {
      throw new BaseMismatchError(
        field,
        `the base checkpoint ${delta.base.checkpointId} is not stored in the namespace`,
      );
    }
    const base = Object.hasOwn(values, baseChannel) ? values[baseChannel] : undefined;
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
      value: { type: delta.type, data },
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
