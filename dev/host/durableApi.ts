import type http from 'node:http';

import { readAllBytes } from '../../shared/streams';
import type { LocalDurableHost } from './durableHost';
import { sendJson } from './httpInvocation';

/** Where the durable client's HTTP API is served, as under the host. */
export const DURABLE_PREFIX = '/runtime/webhooks/durabletask/';

/**
 * The durable client's HTTP API (start an orchestration, read its status), as the Durable Functions
 * extension serves it; `path` is what follows {@link DURABLE_PREFIX}.
 */
export async function serveDurableApi(
  durable: LocalDurableHost,
  path: string,
  method: string,
  req: http.IncomingMessage,
  res: http.ServerResponse,
): Promise<void> {
  const start = /^orchestrators\/([^/]+)(?:\/([^/]+))?$/.exec(path);
  if (start !== null && method === 'POST') {
    const body = (await readAllBytes(req)).toString('utf8');
    const input: unknown = body === '' ? undefined : JSON.parse(body);
    const id = durable.start(
      decodeURIComponent(start[1] ?? ''),
      input,
      start[2] && decodeURIComponent(start[2]),
    );
    res.writeHead(202, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ id }));
    return;
  }
  const instance = /^instances\/([^/]+)$/.exec(path);
  if (instance !== null && method === 'GET') {
    req.resume();
    const status = durable.status(decodeURIComponent(instance[1] ?? ''));
    if (status === undefined) return sendJson(res, 404, 'not_found', 'no such instance');
    const finished = status.runtimeStatus === 'Completed' || status.runtimeStatus === 'Failed';
    res.writeHead(finished ? 200 : 202, { 'content-type': 'application/json' });
    res.end(JSON.stringify(status));
    return;
  }
  req.resume();
  return sendJson(res, 404, 'not_found', `the local runtime does not serve durable ${method} ${path}`);
}
