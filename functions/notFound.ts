import { NotFoundError } from '#shared/errors';

import { httpHandler, registerHttp } from './http/pipeline';

/**
 * Every path no other function serves: 404 with the error JSON instead of the host's empty page.
 * A catch-all template has the lowest precedence on the Functions host and in the local runtime.
 */
function noRoute(): Promise<never> {
  return Promise.reject(
    new NotFoundError('no such route; GET /api/openapi.json lists the routes Cairn serves'),
  );
}

export const notFound = httpHandler(
  'notFound',
  {
    GET: noRoute,
    HEAD: noRoute,
    POST: noRoute,
    PUT: noRoute,
    PATCH: noRoute,
    DELETE: noRoute,
    OPTIONS: noRoute,
  },
  { anonymous: true },
);

registerHttp('notFound', '{*path}', notFound);
