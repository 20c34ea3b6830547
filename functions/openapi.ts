import { documentForVersion, type OpenApiDocument } from '#shared/api/openapi';
import { openApiRoute } from '#shared/protocol/service';

import { json } from './http/request';
import { registerRoute, specHandler } from './http/route';

/** Built on first use: the document only changes with the app's version. */
let served: OpenApiDocument | undefined;

/** `GET /api/openapi.json` (no auth): the OpenAPI 3.1 document of every route, with the app's version. */
export const openapi = specHandler(openApiRoute, {
  GET: (_input, _request, { services }) =>
    Promise.resolve(json(200, (served ??= documentForVersion(services.version)))),
});

registerRoute(openapi);
