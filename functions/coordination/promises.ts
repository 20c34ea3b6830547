import { z } from 'zod';

import { addPromise, listPromises, resolvePromise } from '#shared/coordination/promises';
import { promiseBody, promisesQuery, text } from '#shared/coordination/wire';

import { httpHandler, registerHttp } from '../http/pipeline';
import { json, parseQuery } from '../http/request';
import { readJsonBody } from '../jsonBody';
import { BODY_LIMITS, storeOf } from './common';

/** Promises an agent made in a chat: add, list, resolve (idempotent). */

const resolveBody = z.strictObject({ resolution: text(4000) });

export const promises = httpHandler('promises', {
  GET: async (request, call) => {
    const query = parseQuery(request, promisesQuery);
    return json(200, { promises: await listPromises(storeOf(call), query.status) });
  },
  POST: async (request, call) => {
    const body = await readJsonBody(request, BODY_LIMITS.promise, promiseBody);
    return json(201, await addPromise(storeOf(call), body));
  },
});

export const promiseResolve = httpHandler('promiseResolve', {
  POST: async (request, call) => {
    const body = await readJsonBody(request, BODY_LIMITS.promise, resolveBody);
    return json(200, await resolvePromise(storeOf(call), request.params['id'] ?? '', body.resolution));
  },
});

registerHttp('promises', 'promises', promises);
registerHttp('promiseResolve', 'promises/{id}/resolve', promiseResolve);
