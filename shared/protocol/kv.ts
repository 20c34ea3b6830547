import { z } from 'zod';

import { DEFAULT_MAX_VALUE_BYTES, Etag, Key, KeyPrefix } from './fields.js';
import { route } from './spec.js';
import { TAGS } from './tags.js';

/** Key/value with compare-and-swap on ETags (docs/kv.md). */

const LIMIT_RULE = 'must be a whole number from 1 to 5000';

/** The query of `GET /api/keys`; the MCP tool `list_keys` takes the same fields. */
export const keysQuery = z.object({
  prefix: KeyPrefix.optional().describe(
    'Keys starting with this string (a plain prefix, not a folder; it may end with "/" or inside a segment); empty: all. It must be the beginning of some valid key: the characters of a key, no leading "/", no empty, "." or ".." segment before its last "/", at most 1024 bytes (else 400).',
  ),
  limit: z.coerce
    .number({ error: LIMIT_RULE })
    .int(LIMIT_RULE)
    .min(1, LIMIT_RULE)
    .max(5000, LIMIT_RULE)
    .default(1000)
    .describe('Keys per page.'),
  cursor: z.string().min(1, 'must not be empty').optional().describe('The `cursor` of the previous page.'),
});

export const WriteResult = z
  .object({
    key: Key,
    etag: Etag,
    size: z.number().int().min(0).describe('The size of the stored value in bytes.'),
  })
  .meta({ id: 'WriteResult' });

export const KeyPage = z
  .object({
    keys: z.array(Key),
    cursor: z
      .string()
      .nullable()
      .describe('Opaque; pass it as `cursor` for the next page. Null on the last page.'),
  })
  .meta({ id: 'KeyPage' });

const etagHeader = { description: 'The ETag of the stored value.', schema: Etag };

const conditions = {
  'If-Match': {
    description:
      'Write only if the current ETag is this one (an absent key fails), or with `*` only if the key exists. Not met: 412, nothing written. Not with If-None-Match (400).',
    // eslint-disable-next-line no-control-regex
    schema: z.string().regex(/^(\*|"[^"\u0000-\u001F\u007F]*")$/),
  },
  'If-None-Match': {
    description: 'Only `*`: write only if the key is absent. Not met: 412, nothing written.',
    schema: z.literal('*'),
  },
};

const valueBody = (description: string) =>
  ({
    kind: 'bytes',
    description: `${description} Any media type: the bytes are stored as sent. The limit below is the default of the setting CAIRN_MAX_VALUE_BYTES.`,
    limit: DEFAULT_MAX_VALUE_BYTES,
    limitSetting: 'maxValueBytes',
    required: false,
  }) as const;

const written = (replaced: string) => ({
  200: { description: replaced, body: WriteResult, headers: { ETag: etagHeader } },
  201: { description: 'Created.', body: WriteResult, headers: { ETag: etagHeader } },
});

export const kvRoute = route({
  name: 'kv',
  route: 'kv/{*key}',
  params: z.object({
    key: Key.describe('The key: the rest of the path, each segment percent-encoded on its own.'),
  }),
  operations: {
    GET: {
      operationId: 'getValue',
      summary: 'Read a value',
      tag: TAGS.kv,
      auth: 'tenant',
      answers: { 200: { description: 'The value.', body: 'bytes', headers: { ETag: etagHeader } } },
      errors: [400, 404],
    },
    HEAD: {
      operationId: 'headValue',
      summary: "A value's ETag and size",
      description: 'Answers carry no body, errors included.',
      tag: TAGS.kv,
      auth: 'tenant',
      answers: {
        200: {
          description: 'The value exists.',
          headers: {
            ETag: etagHeader,
            'Content-Length': {
              description: 'The size of the value in bytes.',
              schema: z.number().int().min(0),
            },
          },
        },
        404: { description: 'No value is stored at this key.' },
      },
      errors: [400],
    },
    PUT: {
      operationId: 'putValue',
      summary: 'Write a value',
      description:
        'Without a precondition, overwrites. On the local backend a key cannot also be the folder of another key (`a/b` when `a` exists, or `a` when `a/b` exists): 409, nothing changed.',
      tag: TAGS.kv,
      auth: 'tenant',
      headers: conditions,
      body: valueBody('The value.'),
      answers: written('Replaced.'),
      errors: [400, 409, 412],
    },
    POST: {
      operationId: 'appendValue',
      summary: 'Append to a value',
      description:
        'Atomic: concurrent appends are all kept, each contiguous, in some order. `size` is the size after the append.',
      tag: TAGS.kv,
      auth: 'tenant',
      headers: conditions,
      body: valueBody('The bytes to append.'),
      answers: written('Appended.'),
      errors: [400, 409, 412],
    },
    DELETE: {
      operationId: 'deleteValue',
      summary: 'Delete a value',
      description: 'Also 204 when the key is absent (unless a precondition says otherwise).',
      tag: TAGS.kv,
      auth: 'tenant',
      headers: conditions,
      answers: { 204: { description: 'Deleted, or absent.' } },
      errors: [400, 412],
    },
  },
});

export const keysRoute = route({
  name: 'keys',
  route: 'keys',
  operations: {
    GET: {
      operationId: 'listKeys',
      summary: 'List keys',
      description: 'Ascending; every key is returned exactly once across the pages.',
      tag: TAGS.kv,
      auth: 'tenant',
      query: keysQuery,
      answers: { 200: { description: 'One page of keys.', body: KeyPage } },
      errors: [400],
    },
  },
});
