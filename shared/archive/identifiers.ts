import { InvalidArgumentError } from '../errors';

/**
 * Names inside session archives (docs/archives.md). Session ids, generations and checkpoint ids share one
 * alphabet; object keys inside a session are `blocks/<generation>/<index>` and
 * `tails/<checkpointId>/<generation>`. Everything is validated before any I/O.
 */

/** A full block: files are split into blocks of exactly this size . */
export const BLOCK_BYTES = 64 * 1024;
/** The most files one checkpoint may hold. */
export const MAX_FILES_PER_CHECKPOINT = 128;
/** The largest `data` of a checkpoint, as UTF-8 JSON. */
export const MAX_DATA_BYTES = 16 * 1024;
/** `latest` names the latest checkpoint in routes, so it cannot be a checkpoint id. */
export const LATEST = 'latest';

const ID = /^[A-Za-z0-9._-]{1,128}$/;
export const ID_RULE = 'must be 1-128 characters of [A-Za-z0-9._-], not "." or ".."';

export function isValidId(value: string): boolean {
  return ID.test(value) && value !== '.' && value !== '..';
}

/** Throws InvalidArgumentError naming `field` unless `value` is a session id, generation or checkpoint id. */
export function validateId(value: string, field: string): void {
  if (!isValidId(value)) throw new InvalidArgumentError(field, ID_RULE);
}

export type ObjectKey =
  | { readonly kind: 'block'; readonly generation: string; readonly index: number }
  | { readonly kind: 'tail'; readonly checkpointId: string; readonly generation: string };

/** Parses an object key of a session; throws InvalidArgumentError (field `objectKey`) otherwise. */
export function parseObjectKey(key: string): ObjectKey {
  const [kind, first = '', second = '', ...rest] = key.split('/');
  const invalid = () =>
    new InvalidArgumentError(
      'objectKey',
      'must be blocks/<generation>/<index> or tails/<checkpointId>/<generation>, ids of [A-Za-z0-9._-], the index a decimal number without leading zeros',
    );
  if (rest.length > 0 || !isValidId(first) || !isValidId(second)) throw invalid();
  if (kind === 'blocks') {
    if (!/^(0|[1-9][0-9]{0,14})$/.test(second)) throw invalid();
    return { kind: 'block', generation: first, index: Number(second) };
  }
  if (kind === 'tails') return { kind: 'tail', checkpointId: first, generation: second };
  throw invalid();
}

export function blockKey(generation: string, index: number): string {
  return `blocks/${generation}/${index}`;
}

export function tailKey(checkpointId: string, generation: string): string {
  return `tails/${checkpointId}/${generation}`;
}

/** Checks the size rule of an object: a block is exactly 64 KiB, a tail 1 to 64 KiB - 1. */
export function checkObjectSize(key: ObjectKey, size: number): void {
  if (key.kind === 'block' && size !== BLOCK_BYTES) {
    throw new InvalidArgumentError('body', `a block must be exactly ${BLOCK_BYTES} bytes (got ${size})`);
  }
  if (key.kind === 'tail' && (size < 1 || size >= BLOCK_BYTES)) {
    throw new InvalidArgumentError('body', `a tail must be 1-${BLOCK_BYTES - 1} bytes (got ${size})`);
  }
}
