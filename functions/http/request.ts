import type { HttpRequest } from '@azure/functions';
import { type z } from 'zod';

import { stringifyJson } from '#shared/json';
import { InvalidArgumentError, PayloadTooLargeError } from '#shared/protocol/errors';
import type { WriteConditions } from '#shared/storage/keyValueStore';

/**
 * The request body, refused with 413 as soon as it is known to exceed `limit`: by Content-Length
 * before reading, otherwise while reading. Size is checked before anything else about a body.
 */
export async function readBody(request: HttpRequest, limit: number): Promise<Buffer> {
  const declared = Number(request.headers.get('content-length') ?? NaN);
  if (declared > limit) throw new PayloadTooLargeError(limit);
  // A declared length within the limit is the body's length (HTTP framing): read it whole.
  if (Number.isSafeInteger(declared)) return Buffer.from(await request.arrayBuffer());
  if (request.body === null) return Buffer.alloc(0);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request.body as AsyncIterable<Uint8Array>) {
    size += chunk.length;
    if (size > limit) throw new PayloadTooLargeError(limit);
    chunks.push(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.length));
  }
  return chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks);
}

// eslint-disable-next-line no-control-regex
const ETAG = /^"[^"\u0000-\u001f\u007f]*"$/;

/** If-Match / If-None-Match as store conditions (docs/kv.md); both at once is a 400. */
export function writeConditions(request: HttpRequest): WriteConditions {
  const ifMatch = request.headers.get('if-match')?.trim();
  const ifNoneMatch = request.headers.get('if-none-match')?.trim();
  if (ifMatch !== undefined && ifNoneMatch !== undefined) {
    throw new InvalidArgumentError('If-Match', 'cannot be combined with If-None-Match');
  }
  if (ifNoneMatch !== undefined) {
    if (ifNoneMatch !== '*')
      throw new InvalidArgumentError('If-None-Match', 'only "*" (create only) is supported');
    return { ifAbsent: true };
  }
  if (ifMatch !== undefined) {
    if (ifMatch !== '*' && !ETAG.test(ifMatch)) {
      throw new InvalidArgumentError('If-Match', 'must be "*" or one quoted ETag as returned by Cairn');
    }
    return { ifMatch };
  }
  return {};
}

/** Parses the query string with `schema`; the first problem names its parameter. */
export function parseQuery<T>(request: HttpRequest, schema: z.ZodType<T>): T {
  const result = schema.safeParse(Object.fromEntries(request.query.entries()));
  if (!result.success) {
    const issue = result.error.issues[0];
    throw new InvalidArgumentError(String(issue?.path[0] ?? 'query'), issue?.message ?? 'is invalid');
  }
  return result.data;
}

/**
 * A JSON response body with the given status and extra headers. Serialised here, not by the host,
 * so that a stored value nested too deeply for `JSON.stringify` is still answered.
 */
export function json(status: number, body: unknown, headers: Record<string, string> = {}) {
  return { status, body: stringifyJson(body), headers: { 'content-type': 'application/json', ...headers } };
}
