import { addPromise, listPromises, resolvePromise } from '#shared/coordination/promises';
import { promiseResolveRoute, promisesRoute } from '#shared/protocol/coordination';

import { json } from '../http/request';
import { registerRoute, specHandler } from '../http/route';
import { storeOf } from './common';

/** Promises an agent made in a chat: add, list, resolve (idempotent). */

export const promises = specHandler(promisesRoute, {
  GET: async ({ query }, _request, call) =>
    json(200, { promises: await listPromises(storeOf(call), query.status) }),
  POST: async ({ body }, _request, call) => json(201, await addPromise(storeOf(call), body)),
});

export const promiseResolve = specHandler(promiseResolveRoute, {
  POST: async ({ params: { id }, body }, _request, call) =>
    json(200, await resolvePromise(storeOf(call), id, body.resolution)),
});

registerRoute(promises);
registerRoute(promiseResolve);
