import type http from 'node:http';

import type { LocalDurableHost } from './durableHost';
import { sendJson } from './httpInvocation';
import { drainAfterAnswer, readBodyUpTo } from './requestBody';

/** Where the durable client's HTTP API is served, as under the host. */
export const DURABLE_PREFIX = '/runtime/webhooks/durabletask/';

/**
 * The largest orchestration input taken (the app's own starters send a few KiB at most); a larger
 * body is 413, read no further than that.
 */
export const ORCHESTRATION_INPUT_LIMIT = 1024 * 1024;

/**
 * The durable client's HTTP API (start an orchestration, read its status), as the Durable Functions
 * extension serves it; `path` is what follows {@link DURABLE_PREFIX}, its segments percent-encoded
 * as sent (the caller has checked that they decode). The caller has checked the host key too.
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
    const name = decodeURIComponent(start[1] ?? '');
    if (!durable.hasOrchestration(name)) {
      drainAfterAnswer(req, res);
      return sendJson(res, 404, 'not_found', `no orchestration named ${name}`);
    }
    const body = await readBodyUpTo(req, ORCHESTRATION_INPUT_LIMIT);
    if (body === undefined) {
      drainAfterAnswer(req, res);
      return sendJson(
        res,
        413,
        'payload_too_large',
        `an orchestration input is at most ${ORCHESTRATION_INPUT_LIMIT} bytes`,
      );
    }
    const text = body.toString('utf8');
    let input: unknown;
    try {
      input = text === '' ? undefined : JSON.parse(text);
    } catch {
      return sendJson(res, 400, 'invalid_argument', 'the orchestration input must be JSON');
    }
    const instanceId = start[2] === undefined ? undefined : decodeURIComponent(start[2]);
    if (instanceId !== undefined && durable.status(instanceId) !== undefined) {
      return sendJson(res, 409, 'conflict', `instance ${instanceId} exists`);
    }
    const id = durable.start(name, input, instanceId);
    res.writeHead(202, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ id }));
    return;
  }
  const instance = /^instances\/([^/]+)$/.exec(path);
  if (instance !== null && method === 'GET') {
    drainAfterAnswer(req, res);
    const status = durable.status(decodeURIComponent(instance[1] ?? ''));
    if (status === undefined) return sendJson(res, 404, 'not_found', 'no such instance');
    const finished = status.runtimeStatus === 'Completed' || status.runtimeStatus === 'Failed';
    res.writeHead(finished ? 200 : 202, { 'content-type': 'application/json' });
    res.end(JSON.stringify(status));
    return;
  }
  drainAfterAnswer(req, res);
  return sendJson(res, 404, 'not_found', `the local runtime does not serve durable ${method} ${path}`);
}
