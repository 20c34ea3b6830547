import type { HttpRequest } from '@azure/functions';
import type { z } from 'zod';

import { checkJsonDepth } from '#shared/json';
import { InvalidArgumentError } from '#shared/protocol/errors';

import { readBody } from './http/request';

/**
 * Reads a JSON body of at most `limit` bytes and validates it with `schema`. In this order, so that
 * an oversize body is 413 whatever else is wrong with it: size (413), JSON syntax (400 `body`),
 * nesting (400 naming the top-level field holding arrays or objects nested deeper than
 * `MAX_JSON_DEPTH`, checked without recursion before any schema walks the value), shape (400 naming
 * the first offending field, e.g. `chatIds.2`; `wholeField`, default `body`, when the value as a whole
 * is not what the schema takes). An empty body is `{}` when `emptyIsObject`, else a
 * 400.
 */
export async function readJsonBody<T>(
  request: HttpRequest,
  limit: number,
  schema: z.ZodType<T>,
  options: { emptyIsObject?: boolean } = {},
): Promise<T> {
  return parseJsonBody(await readBody(request, limit), schema, options);
}

/** The steps of {@link readJsonBody} after the size: syntax, nesting, shape. */
export function parseJsonBody<T>(
  bytes: Buffer,
  schema: z.ZodType<T>,
  options: { emptyIsObject?: boolean; wholeField?: string; maxDepth?: number } = {},
): T {
  let value: unknown;
  if (bytes.length === 0 && options.emptyIsObject === true) {
    value = {};
  } else {
    try {
      value = JSON.parse(bytes.toString('utf8')) as unknown;
    } catch {
      throw new InvalidArgumentError('body', 'must be a JSON object');
    }
    checkJsonDepth(value, 'body', options.maxDepth);
  }
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  if (issue === undefined) throw new InvalidArgumentError('body', 'is invalid');
  if (issue.code === 'unrecognized_keys') {
    const where = [...issue.path, issue.keys[0] ?? ''].map(String).join('.');
    throw new InvalidArgumentError(where, 'is not a known field');
  }
  const field = issue.path.length === 0 ? (options.wholeField ?? 'body') : issue.path.map(String).join('.');
  throw new InvalidArgumentError(field, issue.message);
}
