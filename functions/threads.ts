import type { HttpRequest } from '@azure/functions';

import { actorOf } from '#shared/auth';
import type { ThreadStore } from '#shared/threads/threadStore';
import {
  checkpointPutOf,
  checkpointQuery,
  finishRunBody,
  heartbeatBody,
  historyQuery,
  MAX_PUT_BODY_BYTES,
  MAX_SMALL_BODY_BYTES,
  MAX_WRITES_BODY_BYTES,
  putCheckpointBody,
  putWritesBody,
  rewindBody,
  runStartOf,
  startRunBody,
  threadListQuery,
  tupleJson,
  writesPutOf,
} from '#shared/threads/wire';

import { type AuthenticatedCall, httpHandler, registerHttp } from './http/pipeline';
import { json, parseQuery } from './http/request';
import { readJsonBody } from './jsonBody';

/**
 * Threads, checkpoints and runs (docs/threads.md), for LangGraph-style checkpointers and agent
 * loops. Thread names are per tenant: tenant A's `t1` and tenant B's `t1` are different threads in
 * different key spaces, so there is no name another tenant could squat; another tenant's thread
 * simply does not exist for the caller (404), and a write creates or changes the caller's own
 * thread, never another's. (Session archives answer 403 `tenant mismatch` instead because session
 * ids are global, owned by the first tenant that writes one.)
 *
 * Each handler parses its input (400 naming the field, 413 for an oversize body, before any I/O),
 * calls one function of the thread store with the caller's tenant, and shapes the answer.
 */

const param = (request: HttpRequest, name: string) => request.params[name] ?? '';

function threadsOf(call: AuthenticatedCall): ThreadStore {
  return call.services.threads;
}

export const threadList = httpHandler('threadList', {
  GET: async (request, call) => {
    const query = parseQuery(request, threadListQuery);
    return json(200, await threadsOf(call).listThreads(call.principal.tenant, query));
  },
});

export const thread = httpHandler('thread', {
  PUT: async (request, call) => {
    const { created, thread: view } = await threadsOf(call).createThread(
      call.principal.tenant,
      param(request, 'threadId'),
    );
    return json(created ? 201 : 200, view);
  },
  GET: async (request, call) =>
    json(200, await threadsOf(call).getThread(call.principal.tenant, param(request, 'threadId'))),
  DELETE: async (request, call) => {
    await threadsOf(call).deleteThread(
      call.principal.tenant,
      param(request, 'threadId'),
      actorOf(call.principal),
    );
    return { status: 204 };
  },
});

export const threadCheckpoints = httpHandler('threadCheckpoints', {
  POST: async (request, call) => {
    const body = await readJsonBody(request, MAX_PUT_BODY_BYTES, putCheckpointBody);
    const result = await threadsOf(call).putCheckpoint(
      call.principal.tenant,
      param(request, 'threadId'),
      checkpointPutOf(body),
    );
    return json(result.created ? 201 : 200, {
      threadId: result.threadId,
      ns: result.ns,
      checkpointId: result.checkpointId,
      head: result.head,
    });
  },
  GET: async (request, call) => {
    const query = parseQuery(request, historyQuery);
    const page = await threadsOf(call).listCheckpoints(
      call.principal.tenant,
      param(request, 'threadId'),
      query,
    );
    return json(200, { checkpoints: page.checkpoints.map(tupleJson), next: page.next });
  },
});

export const threadCheckpointLatest = httpHandler('threadCheckpointLatest', {
  GET: async (request, call) => {
    const { ns } = parseQuery(request, checkpointQuery);
    return json(
      200,
      tupleJson(await threadsOf(call).getCheckpoint(call.principal.tenant, param(request, 'threadId'), ns)),
    );
  },
});

export const threadCheckpoint = httpHandler('threadCheckpoint', {
  GET: async (request, call) => {
    const { ns } = parseQuery(request, checkpointQuery);
    const tuple = await threadsOf(call).getCheckpoint(
      call.principal.tenant,
      param(request, 'threadId'),
      ns,
      param(request, 'checkpointId'),
    );
    return json(200, tupleJson(tuple));
  },
});

export const threadCheckpointWrites = httpHandler('threadCheckpointWrites', {
  POST: async (request, call) => {
    const body = await readJsonBody(request, MAX_WRITES_BODY_BYTES, putWritesBody);
    const checkpointId = param(request, 'checkpointId');
    const { writes } = await threadsOf(call).putWrites(
      call.principal.tenant,
      param(request, 'threadId'),
      writesPutOf(checkpointId, body),
    );
    return json(200, { threadId: param(request, 'threadId'), ns: body.ns, checkpointId, writes });
  },
});

export const threadRewind = httpHandler('threadRewind', {
  POST: async (request, call) => {
    const body = await readJsonBody(request, MAX_SMALL_BODY_BYTES, rewindBody);
    return json(
      200,
      await threadsOf(call).rewind(
        call.principal.tenant,
        param(request, 'threadId'),
        body,
        actorOf(call.principal),
      ),
    );
  },
});

export const threadRuns = httpHandler('threadRuns', {
  POST: async (request, call) => {
    const body = await readJsonBody(request, MAX_SMALL_BODY_BYTES, startRunBody, { emptyIsObject: true });
    const { run, interrupted } = await threadsOf(call).startRun(
      call.principal.tenant,
      param(request, 'threadId'),
      runStartOf(body),
      actorOf(call.principal),
    );
    return json(201, { ...run, interrupted });
  },
});

export const threadRun = httpHandler('threadRun', {
  GET: async (request, call) =>
    json(
      200,
      await threadsOf(call).getRun(
        call.principal.tenant,
        param(request, 'threadId'),
        param(request, 'runId'),
      ),
    ),
});

export const threadRunHeartbeat = httpHandler('threadRunHeartbeat', {
  POST: async (request, call) => {
    const body = await readJsonBody(request, MAX_SMALL_BODY_BYTES, heartbeatBody, { emptyIsObject: true });
    const run = await threadsOf(call).heartbeat(
      call.principal.tenant,
      param(request, 'threadId'),
      param(request, 'runId'),
      body.leaseSeconds === undefined ? undefined : Math.round(body.leaseSeconds * 1000),
    );
    return json(200, run);
  },
});

export const threadRunFinish = httpHandler('threadRunFinish', {
  POST: async (request, call) => {
    const body = await readJsonBody(request, MAX_SMALL_BODY_BYTES, finishRunBody);
    const run = await threadsOf(call).finishRun(
      call.principal.tenant,
      param(request, 'threadId'),
      param(request, 'runId'),
      body.status,
      actorOf(call.principal),
    );
    return json(200, run);
  },
});

registerHttp('threadList', 'threads', threadList);
registerHttp('thread', 'threads/{threadId}', thread);
registerHttp('threadCheckpoints', 'threads/{threadId}/checkpoints', threadCheckpoints);
registerHttp('threadCheckpointLatest', 'threads/{threadId}/checkpoints/latest', threadCheckpointLatest);
registerHttp('threadCheckpoint', 'threads/{threadId}/checkpoints/{checkpointId}', threadCheckpoint);
registerHttp(
  'threadCheckpointWrites',
  'threads/{threadId}/checkpoints/{checkpointId}/writes',
  threadCheckpointWrites,
);
registerHttp('threadRewind', 'threads/{threadId}/rewind', threadRewind);
registerHttp('threadRuns', 'threads/{threadId}/runs', threadRuns);
registerHttp('threadRun', 'threads/{threadId}/runs/{runId}', threadRun);
registerHttp('threadRunHeartbeat', 'threads/{threadId}/runs/{runId}/heartbeat', threadRunHeartbeat);
registerHttp('threadRunFinish', 'threads/{threadId}/runs/{runId}/finish', threadRunFinish);
