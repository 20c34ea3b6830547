import { z } from 'zod';

import { addPromise, listPromises, resolvePromise } from '#shared/coordination/promises';

import { httpHandler, registerHttp } from '../http/pipeline';
import { json, parseQuery } from '../http/request';
import { readJsonBody } from '../jsonBody';
import { BODY_LIMITS, storeOf, text, timestamp } from './common';

/** Promises an agent made in a chat: add, list, resolve (idempotent). */

const promiseBody = z.strictObject({
  chatId: text(1024),
  description: text(4000),
  dueBy: timestamp.nullable().optional(),
});

const promisesQuery = z.object({
  status: z.enum(['open', 'all'], { error: 'must be "open" or "all"' }).default('open'),
});

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
