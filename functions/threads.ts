import { actorOf } from '#shared/auth';
import {
  threadCheckpointLatestRoute,
  threadCheckpointRoute,
  threadCheckpointsRoute,
  threadCheckpointWritesRoute,
  threadListRoute,
  threadRewindRoute,
  threadRoute,
  threadRunFinishRoute,
  threadRunHeartbeatRoute,
  threadRunRoute,
  threadRunsRoute,
} from '#shared/protocol/threads';
import type { ThreadStore } from '#shared/threads/threadStore';
import { checkpointPutOf, runStartOf, tupleJson, writesPutOf } from '#shared/threads/wire';
import { resolvePutDeltas } from '#shared/threads/wireDelta';

import type { AuthenticatedCall } from './http/pipeline';
import { json } from './http/request';
import { registerRoute, specHandler } from './http/route';

/**
 * Threads, checkpoints and runs (docs/threads.md), for LangGraph-style checkpointers and agent
 * loops, declared in shared/protocol/threads.ts. Thread names are per tenant: tenant A's `t1` and
 * tenant B's `t1` are different threads in different key spaces, so there is no name another
 * tenant could squat; another tenant's thread simply does not exist for the caller (404), and a
 * write creates or changes the caller's own thread, never another's. (Session archives answer 403
 * `tenant mismatch` instead because session ids are global, owned by the first tenant that writes
 * one.)
 *
 * The spec parses the input (400 naming the field, 413 for an oversize body, before any I/O); each
 * handler calls one function of the thread store with the caller's tenant, which checks the rest
 * of the rules before any I/O, and shapes the answer.
 */

function threadsOf(call: AuthenticatedCall): ThreadStore {
  return call.services.threads;
}

export const threadList = specHandler(threadListRoute, {
  GET: async ({ query }, _request, call) =>
    json(200, await threadsOf(call).listThreads(call.principal.tenant, query)),
});

export const thread = specHandler(threadRoute, {
  PUT: async ({ params: { threadId } }, _request, call) => {
    const { created, thread: view } = await threadsOf(call).createThread(call.principal.tenant, threadId);
    return json(created ? 201 : 200, view);
  },
  GET: async ({ params: { threadId } }, _request, call) =>
    json(200, await threadsOf(call).getThread(call.principal.tenant, threadId)),
  DELETE: async ({ params: { threadId } }, _request, call) => {
    await threadsOf(call).deleteThread(call.principal.tenant, threadId, actorOf(call.principal));
    return { status: 204 };
  },
});

export const threadCheckpoints = specHandler(threadCheckpointsRoute, {
  POST: async ({ params: { threadId }, body }, _request, call) => {
    const store = threadsOf(call);
    const tenant = call.principal.tenant;
    const resolved = await resolvePutDeltas(body, (checkpointId) =>
      store.checkpointValues(tenant, threadId, body.ns, checkpointId),
    );
    const result = await store.putCheckpoint(tenant, threadId, checkpointPutOf(resolved));
    return json(result.created ? 201 : 200, {
      threadId: result.threadId,
      ns: result.ns,
      checkpointId: result.checkpointId,
      head: result.head,
    });
  },
  GET: async ({ params: { threadId }, query }, _request, call) => {
    const page = await threadsOf(call).listCheckpoints(call.principal.tenant, threadId, query);
    return json(200, { checkpoints: page.checkpoints.map((tuple) => tupleJson(tuple)), next: page.next });
  },
});

/**
 * A checkpoint, with its values as deltas against `since` when the client holds that checkpoint
 * and the namespace stores it (else whole). Read after the checkpoint: a `since` deleted in between
 * leaves the values whole.
 */
async function checkpointAnswer(
  call: AuthenticatedCall,
  threadId: string,
  query: { ns: string; since?: string | undefined },
  checkpointId?: string,
) {
  const store = threadsOf(call);
  const tenant = call.principal.tenant;
  // The checkpoint the client holds is most often still the head: its writes are read at once.
  const tuple = await store.getCheckpoint(tenant, threadId, query.ns, checkpointId, query.since);
  const values =
    query.since === undefined ? null : await store.checkpointValues(tenant, threadId, query.ns, query.since);
  return json(
    200,
    tupleJson(tuple, values === null ? undefined : { checkpointId: query.since as string, values }),
  );
}

export const threadCheckpointLatest = specHandler(threadCheckpointLatestRoute, {
  GET: async ({ params: { threadId }, query }, _request, call) => checkpointAnswer(call, threadId, query),
});

export const threadCheckpoint = specHandler(threadCheckpointRoute, {
  GET: async ({ params: { threadId, checkpointId }, query }, _request, call) =>
    checkpointAnswer(call, threadId, query, checkpointId),
});

export const threadCheckpointWrites = specHandler(threadCheckpointWritesRoute, {
  POST: async ({ params: { threadId, checkpointId }, body }, _request, call) => {
    const { writes } = await threadsOf(call).putWrites(
      call.principal.tenant,
      threadId,
      writesPutOf(checkpointId, body),
    );
    return json(200, { threadId, ns: body.ns, checkpointId, writes });
  },
});

export const threadRewind = specHandler(threadRewindRoute, {
  POST: async ({ params: { threadId }, body }, _request, call) =>
    json(200, await threadsOf(call).rewind(call.principal.tenant, threadId, body, actorOf(call.principal))),
});

export const threadRuns = specHandler(threadRunsRoute, {
  POST: async ({ params: { threadId }, body }, _request, call) => {
    const { run, interrupted } = await threadsOf(call).startRun(
      call.principal.tenant,
      threadId,
      runStartOf(body),
      actorOf(call.principal),
    );
    return json(201, { ...run, interrupted });
  },
});

export const threadRun = specHandler(threadRunRoute, {
  GET: async ({ params: { threadId, runId } }, _request, call) =>
    json(200, await threadsOf(call).getRun(call.principal.tenant, threadId, runId)),
});

export const threadRunHeartbeat = specHandler(threadRunHeartbeatRoute, {
  POST: async ({ params: { threadId, runId }, body }, _request, call) => {
    const run = await threadsOf(call).heartbeat(
      call.principal.tenant,
      threadId,
      runId,
      body.leaseSeconds === undefined ? undefined : Math.round(body.leaseSeconds * 1000),
    );
    return json(200, run);
  },
});

export const threadRunFinish = specHandler(threadRunFinishRoute, {
  POST: async ({ params: { threadId, runId }, body }, _request, call) => {
    const run = await threadsOf(call).finishRun(
      call.principal.tenant,
      threadId,
      runId,
      body.status,
      actorOf(call.principal),
    );
    return json(200, run);
  },
});

registerRoute(threadList);
registerRoute(thread);
registerRoute(threadCheckpoints);
registerRoute(threadCheckpointLatest);
registerRoute(threadCheckpoint);
registerRoute(threadCheckpointWrites);
registerRoute(threadRewind);
registerRoute(threadRuns);
registerRoute(threadRun);
registerRoute(threadRunHeartbeat);
registerRoute(threadRunFinish);
