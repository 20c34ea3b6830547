import { InvalidArgumentError, PreconditionFailedError } from '../errors';
import type { StoredItem, WriteConditions } from './keyValueStore';

/** Refuses `ifMatch` with `ifAbsent`: one write has one precondition. */
export function checkConditionShape(conditions: WriteConditions): void {
  if (conditions.ifMatch !== undefined && conditions.ifAbsent === true) {
    throw new InvalidArgumentError('conditions', 'ifMatch and ifAbsent cannot be combined');
  }
}

/** Throws PreconditionFailedError unless `conditions` hold for `current` (null: absent). */
export function checkConditions(conditions: WriteConditions, current: StoredItem | null): void {
  checkConditionShape(conditions);
  if (conditions.ifAbsent === true && current !== null) {
    throw new PreconditionFailedError('the key exists', current.etag);
  }
  if (conditions.ifMatch !== undefined) {
    if (current === null) throw new PreconditionFailedError('the key does not exist');
    if (conditions.ifMatch !== '*' && conditions.ifMatch !== current.etag) {
      throw new PreconditionFailedError('the key has changed', current.etag);
    }
  }
}
