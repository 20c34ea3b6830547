import { NotReadyError } from '#shared/protocol/errors';
import { healthReadyRoute, healthRoute } from '#shared/protocol/service';

import { json } from './http/request';
import { registerRoute, specHandler } from './http/route';

/**
 * `GET /api/health` (no auth): liveness, the process answers; it touches no storage, so an outage
 * of the storage never makes an orchestrator restart healthy instances. Also the backend kind and
 * the version; reveals no endpoint, path or secret.
 */
export const health = specHandler(healthRoute, {
  GET: (_input, _request, { services }) =>
    Promise.resolve(json(200, { status: 'ok', backend: services.kvStores.kind, version: services.version })),
});

/**
 * `GET /api/health/ready` (no auth): readiness, whether every configured store answers (see
 * shared/readiness.ts): 200 when all do, else 503 `storage_unavailable` with `Retry-After` and each
 * store's outcome. What a load balancer probes before sending traffic.
 */
export const healthReady = specHandler(healthReadyRoute, {
  GET: async (_input, _request, { services, log }) => {
    const { ready, checks } = await services.readiness.check(log);
    if (!ready) {
      const failing = Object.entries(checks)
        .filter(([, outcome]) => outcome !== 'ok')
        .map(([store, outcome]) => `${store} ${outcome === 'timeout' ? 'did not answer in time' : 'failed'}`);
      throw new NotReadyError(`not ready: ${failing.join(', ')}; retry later`, checks);
    }
    return json(200, { status: 'ready', checks });
  },
});

registerRoute(health);
registerRoute(healthReady);
