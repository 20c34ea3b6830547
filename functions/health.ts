import { httpHandler, registerHttp } from './http/pipeline';
import { json } from './http/request';

/** `GET /api/health` (no auth): liveness and the backend kind; reveals no endpoint, path or secret. */
export const health = httpHandler(
  'health',
  {
    GET: (_request, { services }) =>
      Promise.resolve(
        json(200, { status: 'ok', backend: services.kvStores.kind, version: services.version }),
      ),
  },
  { anonymous: true },
);

registerHttp('health', 'health', health);
