import { InvalidArgumentError } from '../errors.js';
import { isName, NAME_RULE } from '../fields.js';
import {
  BLOCK_BYTES,
  LATEST,
  MAX_DATA_BYTES,
  MAX_FILES_PER_CHECKPOINT,
  objectKeyProblem,
} from '../sessions.js';

/**
 * Names inside session archives (docs/archives.md). Session ids, generations and checkpoint ids share one
 * alphabet; object keys inside a session are `blocks/<generation>/<index>` and
 * `tails/<checkpointId>/<generation>`. Everything is validated before any I/O; the rules and limits
 * are the protocol's (shared/protocol/sessions.ts).
 */

export { BLOCK_BYTES, LATEST, MAX_DATA_BYTES, MAX_FILES_PER_CHECKPOINT };

/** The rule of a session id, generation or checkpoint id, as messages say it. */
export const ID_RULE = NAME_RULE;

export const isValidId = isName;

/** Throws InvalidArgumentError naming `field` unless `value` is a session id, generation or checkpoint id. */
export function validateId(value: string, field: string): void {
  if (!isValidId(value)) throw new InvalidArgumentError(field, ID_RULE);
}

export type ObjectKey =
  | { readonly kind: 'block'; readonly generation: string; readonly index: number }
  | { readonly kind: 'tail'; readonly checkpointId: string; readonly generation: string };

/** Parses an object key of a session; throws InvalidArgumentError (field `objectKey`) otherwise. */
export function parseObjectKey(key: string): ObjectKey {
  const problem = objectKeyProblem(key);
  if (problem !== null) throw new InvalidArgumentError('objectKey', problem);
  const [kind, first = '', second = ''] = key.split('/');
  return kind === 'blocks'
    ? { kind: 'block', generation: first, index: Number(second) }
    : { kind: 'tail', checkpointId: first, generation: second };
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
