import { lru } from '../lru';
import { ownValue, setOwn, type TypedBytes } from './records';

/** Bytes of values one thread store keeps at most (all tenants together). */
export const KEPT_VALUE_BYTES = 8 * 1024 * 1024;
/** A larger value is not kept: it would push out many small, often-read ones. */
const KEPT_VALUE_MAX_BYTES = KEPT_VALUE_BYTES / 8;
/** Checkpoints whose value sources are kept (a few hundred bytes each). */
const KEPT_CHECKPOINTS = 4096;

/**
 * The channel values this instance stored or read lately, so that a read of a checkpoint whose
 * values it holds, a delta put's base and a read's `since` cost no storage request (a read still
 * reads the thread record and the checkpoint's pending writes, so it is as current as without it).
 *
 * Values are kept by their source, never by checkpoint id alone: a source names a value by a digest
 * of its bytes (SHA-256 unsealed, the thread's keyed digest for a value stored by what it adds, 16
 * random bytes when sealed), so a source names one value for as long as it is stored, and a
 * checkpoint id stored again with other content after retention removed it names its values by
 * other sources. Keys also hold the tenant, the thread and its incarnation: a thread deleted and
 * created again names nothing kept of the old one. A source without a digest (none is written any
 * more) is never kept.
 *
 * Beside the values, the sources of checkpoints stored or read here (by checkpoint id), which a
 * delta's base and a read's `since` name. A hint only: what they give is checked against the digest
 * the sender computed (a put) or that the client checks (a read), so a stale entry costs a refusal
 * or a second read, never a wrong value.
 */
export class ValueCache {
  private readonly values = lru<string, TypedBytes>(65_536, {
    limit: KEPT_VALUE_BYTES,
    of: (value) => value.data.length + value.type.length + 96,
  });
  private readonly checkpoints = lru<string, Readonly<Record<string, string>>>(KEPT_CHECKPOINTS);

  /** The key prefix of one thread incarnation of one tenant. */
  static scopeOf(tenant: string, threadId: string, incarnation: string): string {
    return `${tenant}\n${threadId}\n${incarnation}\n`;
  }

  value(scope: string, ns: string, channel: string, source: string): TypedBytes | undefined {
    return hasDigest(source) ? this.values.get(`${scope}${ns}\n${channel}\n${source}`) : undefined;
  }

  /**
   * Keeps `value`. Bytes that are a view of a larger buffer (a value inline in a record, or sent in
   * a request body) are copied, so that keeping them holds only what the budget counts.
   */
  keep(scope: string, ns: string, channel: string, source: string, value: TypedBytes): void {
    if (!hasDigest(source) || value.data.length > KEPT_VALUE_MAX_BYTES) return;
    const { data } = value;
    let kept = value;
    if (data.byteOffset !== 0 || data.byteLength !== data.buffer.byteLength) {
      const copy = Buffer.allocUnsafeSlow(data.length);
      data.copy(copy);
      kept = { type: value.type, data: copy };
    }
    this.values.set(`${scope}${ns}\n${channel}\n${source}`, kept);
  }

  /** Remembers which value each channel of a checkpoint has (its record's `valueSources`). */
  rememberCheckpoint(
    scope: string,
    ns: string,
    checkpointId: string,
    valueSources: Readonly<Record<string, string>>,
  ): void {
    this.checkpoints.set(`${scope}${ns}\n${checkpointId}`, valueSources);
  }

  /** Every value of a checkpoint, when all of them are kept; else undefined. */
  valuesOf(scope: string, ns: string, checkpointId: string): Record<string, TypedBytes> | undefined {
    const sources = this.checkpoints.get(`${scope}${ns}\n${checkpointId}`);
    if (sources === undefined) return undefined;
    const values: Record<string, TypedBytes> = {};
    for (const channel of Object.keys(sources)) {
      const value = this.value(scope, ns, channel, ownValue(sources, channel) as string);
      if (value === undefined) return undefined;
      setOwn(values, channel, value);
    }
    return values;
  }
}

/** Whether a source names its value by a digest (`<checkpoint id>/[~*]<digest>`). */
function hasDigest(source: string): boolean {
  const slash = source.lastIndexOf('/');
  return slash > 0 && source.length - slash > 16;
}
