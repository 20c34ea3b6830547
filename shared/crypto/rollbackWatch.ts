import { lru } from '../lru';
import { IntegrityError } from '../protocol/errors';
import { sealIdentity } from './sealedFormat';

/**
 * Detects a sealed key/value value rolled back at the storage level: an older sealed file of the
 * same key put back in place of a newer one. The seal binds a value to its tenant and key, not to
 * its version (every version of a key opens), so what is checked is order, as this process saw it.
 *
 * Every seal has a random 96-bit IV, so a sealed value's IV names exactly one write: no later write
 * (by any instance, the rewrap job included) ever stores the same IV again; only a copy of the old
 * bytes does. For each key the process remembers the IVs it wrote or read, and when each was
 * superseded: by an operation that found another version (or the key absent) and that started
 * after an operation that found the old one had ended. With storage that is strongly consistent
 * (both backends are), a read that starts after that and still finds the old IV saw the old bytes
 * come back: a rollback, refused as `integrity_error`. Operations that overlap never accuse each
 * other (a read in flight while this process writes may still find the previous version).
 *
 * Bounded: the last {@link IVS_PER_KEY} versions of each of the {@link KEYS} keys used most
 * recently. Not detected: a rollback to a version this process never saw (written and replaced
 * while it was not running, or by other instances between two of its reads), and anything after
 * a restart: the memory is the process's. An attacker who restores a whole older consistent state
 * before the process sees the newer one cannot be told apart from that state without an anchor
 * outside the storage.
 */

const KEYS = 10_000;
const IVS_PER_KEY = 16;
/** The observation of a key found absent (deleted): it supersedes, and is never accused. */
const ABSENT = '';

interface Version {
  /** Ticket at which the last operation that found it ended. */
  lastEnd: number;
  /** Ticket at which an operation that started after `lastEnd` found another version, if any. */
  supersededAt?: number;
}

export class RollbackWatch {
  private readonly keys = lru<string, Map<string, Version>>(KEYS);
  private ticket = 0;

  /** A ticket for an operation's start; pass it to {@link observed} when it completes. */
  start(): number {
    return ++this.ticket;
  }

  /**
   * Records that an operation started at `start` found (or wrote) `sealed` at `place` (null: the
   * key absent). Throws IntegrityError when the bytes are a version superseded before it started.
   */
  observed(place: string, start: number, sealed: Buffer | null): void {
    const end = ++this.ticket;
    const iv = sealed === null ? ABSENT : sealIdentity(sealed);
    let versions = this.keys.get(place);
    if (versions === undefined) {
      versions = new Map();
      this.keys.set(place, versions);
    }
    const known = versions.get(iv);
    if (iv !== ABSENT && known?.supersededAt !== undefined && known.supersededAt < start) {
      throw new IntegrityError(
        `the stored kv value at ${place.slice(place.indexOf('\n') + 1)} is an older version put back in place of a newer one (rolled back at the storage level)`,
      );
    }
    for (const [other, version] of versions) {
      if (other !== iv && version.supersededAt === undefined && version.lastEnd < start) {
        version.supersededAt = end;
      }
    }
    if (known === undefined) {
      versions.set(iv, { lastEnd: end });
      if (versions.size > IVS_PER_KEY) versions.delete(versions.keys().next().value as string);
    } else {
      known.lastEnd = Math.max(known.lastEnd, end);
    }
  }
}
