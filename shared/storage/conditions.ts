import { InvalidArgumentError, PreconditionFailedError } from '../protocol/errors';
import type { StoredItem, WriteConditions } from './keyValueStore';

/** Refuses `ifMatch` with `ifAbsent`: one write has one precondition. */
export function checkConditionShape(conditions: WriteConditions): void {
  if (conditions.ifMatch !== undefined && conditions.ifAbsent === true) {
    throw new InvalidArgumentError('conditions', 'ifMatch and ifAbsent cannot be combined');
  }
}

/** Why `conditions` do not hold for `current` (null: absent), or null when they hold. */
function conditionFailure(conditions: WriteConditions, current: StoredItem | null): string | null {
  if (conditions.ifAbsent === true && current !== null) return 'the key exists';
  if (conditions.ifMatch !== undefined) {
    if (current === null) return 'the key does not exist';
    if (conditions.ifMatch !== '*' && conditions.ifMatch !== current.etag) return 'the key has changed';
  }
  return null;
}

/** True when `conditions` hold for `current` (null: absent). */
export function conditionsHold(conditions: WriteConditions, current: StoredItem | null): boolean {
  return conditionFailure(conditions, current) === null;
}

/** Throws PreconditionFailedError (with the current ETag) unless `conditions` hold for `current`. */
export function checkConditions(conditions: WriteConditions, current: StoredItem | null): void {
  checkConditionShape(conditions);
  const failure = conditionFailure(conditions, current);
  if (failure !== null) throw new PreconditionFailedError(failure, current?.etag);
}
