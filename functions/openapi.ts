import { documentForVersion, type OpenApiDocument } from '#shared/api/openapi';

import { httpHandler, registerHttp } from './http/pipeline';
import { json } from './http/request';

/** Built on first use: the document only changes with the app's version. */
let served: OpenApiDocument | undefined;

/** `GET /api/openapi.json` (no auth): the OpenAPI 3.1 document of every route, with the app's version. */
export const openapi = httpHandler(
  'openapi',
  {
    GET: (_request, { services }) =>
      Promise.resolve(json(200, (served ??= documentForVersion(services.version)))),
  },
  { anonymous: true },
);

registerHttp('openapi', 'openapi.json', openapi);
