import { CairnError, PreconditionFailedError, StorageUnavailableError } from '../protocol/errors';
import type { KeyValueStore, StoredValue, WriteConditions } from '../storage/keyValueStore';

/**
 * The outcome of one conditional write, told apart the way fleet coordination needs it:
 *
 * - `won`: the write landed; `etag` is the new version.
 * - `lost`: the precondition failed (another writer got there first); nothing was written.
 * - `failed`: the write certainly did not land: the store refused it before writing (a caller-side
 *   error such as a key that is another key's folder, a value over the limit, or a request the
 *   service rejected as malformed).
 * - `unknown`: it may or may not have landed. Every {@link StorageUnavailableError} from a write is
 *   unknown: it covers timeouts and dropped connections after the request was sent that the store
 *   could not settle itself. Nothing short of reading back can tell, so nothing here pretends to.
 *
 * A {@link PreconditionFailedError} is `lost` because the stores never answer it for the echo of
 * their own write: the Blob store sends conditional writes without the SDK's retries (a retry of a
 * write that landed would meet 412) and settles a lost answer by reading back.
 */
export type WriteOutcome =
  | { readonly result: 'won'; readonly etag: string }
  | { readonly result: 'lost' }
  | { readonly result: 'failed'; readonly error: unknown }
  | { readonly result: 'unknown'; readonly error: unknown };

/** Writes `value` under `conditions` and classifies the result; never throws. */
export async function conditionalWrite(
  store: KeyValueStore,
  key: string,
  value: Buffer,
  conditions: WriteConditions,
): Promise<WriteOutcome> {
  try {
    const written = await store.write(key, value, conditions);
    return { result: 'won', etag: written.etag };
  } catch (error) {
    if (error instanceof PreconditionFailedError) return { result: 'lost' };
    if (error instanceof StorageUnavailableError) return { result: 'unknown', error };
    // A CairnError other than "unavailable" is raised before the write or by the service refusing
    // the request (InternalError for an unexpected 4xx): the bytes did not land.
    if (error instanceof CairnError) return { result: 'failed', error };
    // Anything else is a bug somewhere below: it could have struck after the write.
    return { result: 'unknown', error };
  }
}

/** A read that never throws: the stored value, null for absent, or the error for a failed read. */
export type ReadOutcome =
  | { readonly ok: true; readonly stored: StoredValue | null }
  | { readonly ok: false; readonly error: unknown };

export async function readOutcome(store: KeyValueStore, key: string): Promise<ReadOutcome> {
  try {
    return { ok: true, stored: await store.read(key) };
  } catch (error) {
    return { ok: false, error };
  }
}

/** Parses JSON, or returns `undefined` when the text is not JSON. */
export function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

/** Decodes stored bytes as UTF-8, or null when they are not valid UTF-8. */
export function decodeUtf8(bytes: Buffer): string | null {
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    return null;
  }
}
