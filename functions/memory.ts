import { actorOf } from '#shared/auth';
import type { Caller, MemoryFacts } from '#shared/memory/memory';
import { runMemoryBatch } from '#shared/memory/memoryBatch';
import { checkFilter } from '#shared/memory/valueFilter';
import { NotFoundError } from '#shared/protocol/errors';
import {
  memoryBatchRoute,
  memoryFactRoute,
  memoryNamespacesRoute,
  memorySearchRoute,
} from '#shared/protocol/memory';
import { configuredMemory } from '#shared/services';

import { errorResponse } from './http/errorResponse';
import type { AuthenticatedCall } from './http/pipeline';
import { json, writeConditions } from './http/request';
import { registerRoute, specHandler } from './http/route';

/**
 * Long-term memory (docs/memory.md): facts per tenant under namespaces. Namespaces and keys travel
 * in the query string (`?namespace=users/42&key=language`), so any name the rules allow, `..` and
 * `%` included, reaches the store exactly as sent: no path normalisation can turn one into
 * another. Every route works for the caller's tenant only; another tenant's facts do not exist for
 * it. The specs (shared/protocol/memory.ts) check the request (400 naming the field, 413 for an
 * oversize body, before any I/O); each handler calls one function of the memory facts, which check
 * what a schema cannot (vectors, filters, a value's size), and shapes the answer.
 */

const memoryOf = (call: AuthenticatedCall): MemoryFacts => configuredMemory(call.services);

const callerOf = (call: AuthenticatedCall): Caller => ({
  tenant: call.principal.tenant,
  actor: actorOf(call.principal),
});

/** Memory switched off: every route answers 501 `not_configured`, whatever its input. */
const requireMemory = { before: (call: AuthenticatedCall) => void memoryOf(call) };

export const memoryFact = specHandler(
  memoryFactRoute,
  {
    PUT: async ({ query, body }, request, call) => {
      const { item, created } = await memoryOf(call).remember(
        callerOf(call),
        query.namespace,
        query.key,
        body.value,
        {
          conditions: writeConditions(request),
          ...(body.ttl === undefined ? {} : { ttl: body.ttl }),
          ...(body.vectors === undefined ? {} : { vectors: body.vectors }),
        },
      );
      return json(created ? 201 : 200, item, { etag: item.etag });
    },
    GET: async ({ query }, _request, call) => {
      const item = await memoryOf(call).recall(callerOf(call), query.namespace, query.key);
      if (item === null) throw new NotFoundError('no fact is stored under this namespace and key');
      return json(200, item, { etag: item.etag });
    },
    DELETE: async ({ query }, request, call) => {
      await memoryOf(call).forget(callerOf(call), query.namespace, query.key, writeConditions(request));
      return { status: 204 };
    },
  },
  requireMemory,
);

export const memorySearch = specHandler(
  memorySearchRoute,
  {
    POST: async ({ body }, _request, call) => {
      const result = await memoryOf(call).search(callerOf(call), {
        namespace: body.namespace,
        ...(body.text === undefined ? {} : { text: body.text }),
        ...(body.vector === undefined ? {} : { vector: body.vector }),
        distance: body.distance,
        limit: body.limit,
        offset: body.offset,
        ...(body.filter === undefined ? {} : { filter: checkFilter(body.filter) }),
      });
      return json(200, result);
    },
  },
  requireMemory,
);

export const memoryNamespaces = specHandler(
  memoryNamespacesRoute,
  {
    GET: async ({ query }, _request, call) => {
      return json(
        200,
        await memoryOf(call).listNamespaces(callerOf(call), {
          limit: query.limit,
          offset: query.offset,
          ...(query.prefix === undefined ? {} : { prefix: query.prefix }),
          ...(query.suffix === undefined ? {} : { suffix: query.suffix }),
          ...(query.maxDepth === undefined ? {} : { maxDepth: query.maxDepth }),
        }),
      );
    },
    DELETE: async ({ query }, _request, call) => {
      const result = await memoryOf(call).forgetAll(callerOf(call), query.namespace, {
        all: query.all === 'true',
      });
      return json(200, result);
    },
  },
  requireMemory,
);

export const memoryBatch = specHandler(
  memoryBatchRoute,
  {
    POST: async ({ body }, _request, call) => {
      const outcomes = await runMemoryBatch(memoryOf(call), callerOf(call), body.operations);
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
  },
  requireMemory,
);

registerRoute(memoryFact);
registerRoute(memorySearch);
registerRoute(memoryNamespaces);
registerRoute(memoryBatch);
