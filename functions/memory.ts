import { actorOf } from '#shared/auth';
import { NotFoundError } from '#shared/errors';
import type { Caller, MemoryFacts } from '#shared/memory/memory';
import { batchBody, MAX_BATCH_BODY_BYTES, runMemoryBatch } from '#shared/memory/memoryBatch';
import { checkFilter } from '#shared/memory/valueFilter';
import {
  factQuery,
  forgetAllQuery,
  MAX_FACT_BODY_BYTES,
  MAX_SEARCH_BODY_BYTES,
  namespacesQuery,
  rememberBody,
  searchBody,
} from '#shared/memory/wire';
import { configuredMemory } from '#shared/services';

import { errorResponse } from './http/errorResponse';
import { type AuthenticatedCall, httpHandler, registerHttp } from './http/pipeline';
import { json, parseQuery, writeConditions } from './http/request';
import { readJsonBody } from './jsonBody';

/**
 * Long-term memory (docs/memory.md): facts per tenant under namespaces. Namespaces and keys travel
 * in the query string (`?namespace=users/42&key=language`), so any name the rules allow, `..` and
 * `%` included, reaches the store exactly as sent: no path normalisation can turn one into
 * another. Every route works for the caller's tenant only; another tenant's facts do not exist for
 * it. Each handler parses (400 naming the field, 413 for an oversize body, before any I/O), calls
 * one function of the memory facts, and shapes the answer.
 */

const memoryOf = (call: AuthenticatedCall): MemoryFacts => configuredMemory(call.services);

const callerOf = (call: AuthenticatedCall): Caller => ({
  tenant: call.principal.tenant,
  actor: actorOf(call.principal),
});

export const memoryFact = httpHandler('memoryFact', {
  PUT: async (request, call) => {
    const body = await readJsonBody(request, MAX_FACT_BODY_BYTES, rememberBody);
    const { namespace, key } = parseQuery(request, factQuery);
    const { item, created } = await memoryOf(call).remember(callerOf(call), namespace, key, body.value, {
      conditions: writeConditions(request),
      ...(body.ttl === undefined ? {} : { ttl: body.ttl }),
      ...(body.vectors === undefined ? {} : { vectors: body.vectors }),
    });
    return json(created ? 201 : 200, item, { etag: item.etag });
  },
  GET: async (request, call) => {
    const { namespace, key } = parseQuery(request, factQuery);
    const item = await memoryOf(call).recall(callerOf(call), namespace, key);
    if (item === null) throw new NotFoundError('no fact is stored under this namespace and key');
    return json(200, item, { etag: item.etag });
  },
  DELETE: async (request, call) => {
    const { namespace, key } = parseQuery(request, factQuery);
    await memoryOf(call).forget(callerOf(call), namespace, key, writeConditions(request));
    return { status: 204 };
  },
});

export const memorySearch = httpHandler('memorySearch', {
  POST: async (request, call) => {
    const body = await readJsonBody(request, MAX_SEARCH_BODY_BYTES, searchBody);
    const result = await memoryOf(call).search(callerOf(call), {
      namespace: body.namespace,
      ...(body.text === undefined ? {} : { text: body.text }),
      ...(body.vector === undefined ? {} : { vector: body.vector }),
      ...(body.distance === undefined ? {} : { distance: body.distance }),
      ...(body.limit === undefined ? {} : { limit: body.limit }),
      ...(body.offset === undefined ? {} : { offset: body.offset }),
      ...(body.filter === undefined ? {} : { filter: checkFilter(body.filter) }),
    });
    return json(200, result);
  },
});

export const memoryNamespaces = httpHandler('memoryNamespaces', {
  GET: async (request, call) => {
    const query = parseQuery(request, namespacesQuery);
    return json(200, await memoryOf(call).listNamespaces(callerOf(call), query));
  },
  DELETE: async (request, call) => {
    const query = parseQuery(request, forgetAllQuery);
    const result = await memoryOf(call).forgetAll(callerOf(call), query.namespace, {
      all: query.all === 'true',
    });
    return json(200, result);
  },
});

export const memoryBatch = httpHandler('memoryBatch', {
  POST: async (request, call) => {
    const { operations } = await readJsonBody(request, MAX_BATCH_BODY_BYTES, batchBody);
    const outcomes = await runMemoryBatch(memoryOf(call), callerOf(call), operations);
    // Each operation's error as its route would answer it: status, the error JSON, and the ETag.
    const results = outcomes.map((outcome) => {
      // A put that created its fact is a 201, as on its route.
      if (!('error' in outcome))
        return { status: outcome.result['created'] === true ? 201 : 200, ...outcome.result };
      const answer = errorResponse(outcome.error, call.log);
      const etag = (answer.headers as Record<string, string> | undefined)?.['etag'];
      return {
        status: answer.status,
        ...(answer.jsonBody as Record<string, unknown>),
        ...(etag === undefined ? {} : { etag }),
      };
    });
    return json(200, { results });
  },
});

registerHttp('memoryFact', 'memory/facts', memoryFact);
registerHttp('memorySearch', 'memory/search', memorySearch);
registerHttp('memoryNamespaces', 'memory/namespaces', memoryNamespaces);
registerHttp('memoryBatch', 'memory/batch', memoryBatch);
