import type { HttpRequest } from '@azure/functions';

import { NotFoundError, PreconditionFailedError } from '#shared/errors';
import type { KeyValueStore } from '#shared/storage/keyValueStore';
import { keysQuery } from '#shared/storage/kvWire';

import { type AuthenticatedCall, httpHandler, registerHttp } from './http/pipeline';
import { json, parseQuery, readBody, writeConditions } from './http/request';

/** Key/value with compare-and-swap (docs/kv.md). Every store is the caller's tenant's. */

/**
 * The key is the path after `/api/kv/` as the host's routing hands it over: each segment
 * percent-decoded (so `%2E%2E` arrives as `..` and is refused by the store's key validation).
 */
function keyOf(request: HttpRequest): string {
  return request.params['key'] ?? '';
}

function storeOf(call: AuthenticatedCall): KeyValueStore {
  return call.services.kvStores.forTenant(call.principal.tenant);
}

async function write(request: HttpRequest, call: AuthenticatedCall, mode: 'write' | 'append') {
  const body = await readBody(request, call.services.config.maxValueBytes);
  const key = keyOf(request);
  const conditions = writeConditions(request);
  const store = storeOf(call);
  const result =
    mode === 'write' ? await store.write(key, body, conditions) : await store.append(key, body, conditions);
  return json(
    result.created ? 201 : 200,
    { key, etag: result.etag, size: result.size },
    { etag: result.etag },
  );
}

export const kv = httpHandler('kv', {
  GET: async (request, call) => {
    const key = keyOf(request);
    const stored = await storeOf(call).read(key);
    if (stored === null) throw new NotFoundError('no value is stored at this key');
    return {
      status: 200,
      body: stored.value,
      headers: { etag: stored.etag, 'content-type': 'application/octet-stream' },
    };
  },
  HEAD: async (request, call) => {
    const item = await storeOf(call).head(keyOf(request));
    if (item === null) return { status: 404 };
    return {
      status: 200,
      headers: {
        etag: item.etag,
        'content-length': String(item.size),
        'content-type': 'application/octet-stream',
      },
    };
  },
  PUT: (request, call) => write(request, call, 'write'),
  POST: (request, call) => write(request, call, 'append'),
  DELETE: async (request, call) => {
    const key = keyOf(request);
    const conditions = writeConditions(request);
    const store = storeOf(call);
    if (conditions.ifAbsent === true) {
      // "Delete only if absent" deletes nothing; it fails when the key exists.
      const item = await store.head(key);
      if (item !== null) throw new PreconditionFailedError('the key exists', item.etag);
    } else {
      await store.delete(key, conditions);
    }
    return { status: 204 };
  },
});

export const keys = httpHandler('keys', {
  GET: async (request, call) => {
    const query = parseQuery(request, keysQuery);
    const page = await storeOf(call).list({
      limit: query.limit,
      ...(query.prefix === undefined ? {} : { prefix: query.prefix }),
      ...(query.cursor === undefined ? {} : { cursor: query.cursor }),
    });
    return json(200, { keys: page.keys, cursor: page.cursor });
  },
});

registerHttp('kv', 'kv/{*key}', kv);
registerHttp('keys', 'keys', keys);
