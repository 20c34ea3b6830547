import { NotReadyError } from '#shared/errors';

import { httpHandler, registerHttp } from './http/pipeline';
import { json } from './http/request';

/**
 * `GET /api/health` (no auth): liveness, the process answers; it touches no storage, so an outage
 * of the storage never makes an orchestrator restart healthy instances. Also the backend kind and
 * the version; reveals no endpoint, path or secret.
 */
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

/**
 * `GET /api/health/ready` (no auth): readiness, whether every configured store answers (see
 * shared/readiness.ts): 200 when all do, else 503 `storage_unavailable` with `Retry-After` and each
 * store's outcome. What a load balancer probes before sending traffic.
 */
export const healthReady = httpHandler(
  'healthReady',
  {
    GET: async (_request, { services, log }) => {
      const { ready, checks } = await services.readiness.check(log);
      if (!ready) {
        const failing = Object.entries(checks)
          .filter(([, outcome]) => outcome !== 'ok')
          .map(
            ([store, outcome]) => `${store} ${outcome === 'timeout' ? 'did not answer in time' : 'failed'}`,
          );
        throw new NotReadyError(`not ready: ${failing.join(', ')}; retry later`, checks);
      }
      return json(200, { status: 'ready', checks });
    },
  },
  { anonymous: true },
);

registerHttp('health', 'health', health);
registerHttp('healthReady', 'health/ready', healthReady);
