import { NotFoundError } from '#shared/protocol/errors';
import { notFoundRoute } from '#shared/protocol/service';

import { registerRoute, specHandler } from './http/route';

/**
 * Every path no other function serves: 404 with the error JSON instead of the host's empty page.
 * A catch-all template has the lowest precedence on the Functions host and in the local runtime.
 */
function noRoute(): Promise<never> {
  return Promise.reject(
    new NotFoundError('no such route; GET /api/openapi.json lists the routes Cairn serves'),
  );
}

export const notFound = specHandler(notFoundRoute, {
  GET: noRoute,
  HEAD: noRoute,
  POST: noRoute,
  PUT: noRoute,
  PATCH: noRoute,
  DELETE: noRoute,
  OPTIONS: noRoute,
});

registerRoute(notFound);
