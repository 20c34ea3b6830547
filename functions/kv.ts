import type { HttpRequest } from '@azure/functions';

import { NotFoundError, PreconditionFailedError } from '#shared/protocol/errors';
import { keysRoute, kvRoute } from '#shared/protocol/kv';
import type { KeyValueStore } from '#shared/storage/keyValueStore';

import type { AuthenticatedCall } from './http/pipeline';
import { json, writeConditions } from './http/request';
import { registerRoute, specHandler } from './http/route';

/**
 * Key/value with compare-and-swap (docs/kv.md). Every store is the caller's tenant's. The key is
 * the path after `/api/kv/` as the host's routing hands it over: each segment percent-decoded (so
 * `%2E%2E` arrives as `..` and is refused by the key's rules).
 */

function storeOf(call: AuthenticatedCall): KeyValueStore {
  return call.services.kvStores.forTenant(call.principal.tenant);
}

async function write(
  key: string,
  body: Buffer,
  request: HttpRequest,
  call: AuthenticatedCall,
  mode: 'write' | 'append',
) {
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

export const kv = specHandler(kvRoute, {
  GET: async ({ params }, _request, call) => {
    const stored = await storeOf(call).read(params.key);
    if (stored === null) throw new NotFoundError('no value is stored at this key');
    return {
      status: 200,
      body: stored.value,
      headers: { etag: stored.etag, 'content-type': 'application/octet-stream' },
    };
  },
  HEAD: async ({ params }, _request, call) => {
    const item = await storeOf(call).head(params.key);
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
  PUT: ({ params, body }, request, call) => write(params.key, body, request, call, 'write'),
  POST: ({ params, body }, request, call) => write(params.key, body, request, call, 'append'),
  DELETE: async ({ params }, request, call) => {
    const conditions = writeConditions(request);
    const store = storeOf(call);
    if (conditions.ifAbsent === true) {
      // "Delete only if absent" deletes nothing; it fails when the key exists.
      const item = await store.head(params.key);
      if (item !== null) throw new PreconditionFailedError('the key exists', item.etag);
    } else {
      await store.delete(params.key, conditions);
    }
    return { status: 204 };
  },
});

export const keys = specHandler(keysRoute, {
  GET: async ({ query }, _request, call) => {
    const page = await storeOf(call).list({
      limit: query.limit,
      ...(query.prefix === undefined ? {} : { prefix: query.prefix }),
      ...(query.cursor === undefined ? {} : { cursor: query.cursor }),
    });
    return json(200, { keys: page.keys, cursor: page.cursor });
  },
});

registerRoute(kv);
registerRoute(keys);
