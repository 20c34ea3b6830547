import { isDeepStrictEqual } from 'node:util';

import { stringifyJson } from '../json';
import { InvalidArgumentError } from '../protocol/errors';
import { MAX_FILTER_FIELDS } from '../protocol/memory';

/**
 * Filters on the top-level fields of a fact's value, as LangGraph stores take them:
 * `{ "status": "active", "score": { "$gte": 3 } }`. Every field's condition must hold.
 *
 * - A plain value (also an object without `$` operators) is equality: deep JSON equality.
 * - `$eq`, `$ne`: deep JSON equality or its negation (`$ne` holds for a missing field).
 * - `$gt`, `$gte`, `$lt`, `$lte`: both numbers, or both strings (compared by UTF-16 code units);
 *   any other pair does not hold.
 * - `$in`, `$nin`: an array of values; deep equality with one of them, or with none (`$nin` holds
 *   for a missing field).
 * - `$exists`: true holds when the field is present (also when null), false when it is missing.
 *
 * A value that is not a JSON object has no fields: only conditions a missing field meets hold.
 *
 * Deep equality recurses only as deep as both sides share structure, so its depth is bounded by
 * the filter's operand (a request body, at most `MAX_JSON_DEPTH` levels), however deeply the stored
 * value nests.
 */

export type ValueFilter = Readonly<Record<string, unknown>>;

const OPERATORS = new Set(['$eq', '$ne', '$gt', '$gte', '$lt', '$lte', '$in', '$nin', '$exists']);

function isOperatorObject(condition: unknown): condition is Record<string, unknown> {
  if (typeof condition !== 'object' || condition === null || Array.isArray(condition)) return false;
  const names = Object.keys(condition);
  return names.length > 0 && names.every((name) => name.startsWith('$'));
}

/**
 * Throws InvalidArgumentError (field `filter.<name>`) unless `filter` is a valid filter; answers
 * it as JSON holds it: a -0 (which a body may hold, `-0` or `-0.0`) is 0, as in every stored value
 * (written by `JSON.stringify`), since deep equality tells -0 from 0 and JSON has one zero.
 */
export function checkFilter(filter: unknown): ValueFilter {
  if (typeof filter !== 'object' || filter === null || Array.isArray(filter)) {
    throw new InvalidArgumentError('filter', 'must be an object of field conditions');
  }
  const fields = Object.entries(filter);
  if (fields.length > MAX_FILTER_FIELDS) {
    throw new InvalidArgumentError('filter', `must have at most ${MAX_FILTER_FIELDS} fields`);
  }
  for (const [name, condition] of fields) {
    if (!isOperatorObject(condition)) continue;
    for (const [operator, operand] of Object.entries(condition)) {
      const where = `filter.${name}.${operator}`;
      if (!OPERATORS.has(operator)) {
        throw new InvalidArgumentError(where, `is not an operator; known: ${[...OPERATORS].join(', ')}`);
      }
      if ((operator === '$in' || operator === '$nin') && !Array.isArray(operand)) {
        throw new InvalidArgumentError(where, 'must be an array');
      }
      if (operator === '$exists' && typeof operand !== 'boolean') {
        throw new InvalidArgumentError(where, 'must be true or false');
      }
    }
  }
  // Without recursion: an MCP tool's filter comes with no body bounding its depth.
  return JSON.parse(stringifyJson(filter)) as ValueFilter;
}

function ordered(field: unknown, operand: unknown, holds: (order: number) => boolean): boolean {
  if (typeof field === 'number' && typeof operand === 'number') return holds(field - operand);
  if (typeof field === 'string' && typeof operand === 'string') {
    return holds(field < operand ? -1 : field > operand ? 1 : 0);
  }
  return false;
}

function operatorHolds(operator: string, operand: unknown, present: boolean, field: unknown): boolean {
  switch (operator) {
    case '$eq':
      return present && isDeepStrictEqual(field, operand);
    case '$ne':
      return !present || !isDeepStrictEqual(field, operand);
    case '$gt':
      return present && ordered(field, operand, (order) => order > 0);
    case '$gte':
      return present && ordered(field, operand, (order) => order >= 0);
    case '$lt':
      return present && ordered(field, operand, (order) => order < 0);
    case '$lte':
      return present && ordered(field, operand, (order) => order <= 0);
    case '$in':
      return present && (operand as unknown[]).some((item) => isDeepStrictEqual(field, item));
    case '$nin':
      return !present || !(operand as unknown[]).some((item) => isDeepStrictEqual(field, item));
    case '$exists':
      return present === operand;
    default:
      return false;
  }
}

/** True when `value` meets every condition of `filter` (checked with {@link checkFilter}). */
export function matchesFilter(value: unknown, filter: ValueFilter): boolean {
  const fields =
    typeof value === 'object' && value !== null && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : {};
  for (const [name, condition] of Object.entries(filter)) {
    const present = Object.hasOwn(fields, name);
    const field = present ? fields[name] : undefined;
    if (isOperatorObject(condition)) {
      for (const [operator, operand] of Object.entries(condition)) {
        if (!operatorHolds(operator, operand, present, field)) return false;
      }
    } else if (!present || !isDeepStrictEqual(field, condition)) {
      return false;
    }
  }
  return true;
}
