import type { HttpResponseInit } from '@azure/functions';

import type { SessionArchive } from '#shared/archive/sessionArchive';
import { actorOf } from '#shared/auth';
import { NotConfiguredError } from '#shared/protocol/errors';
import {
  sessionCheckpointRoute,
  sessionCheckpointsRoute,
  sessionFileRoute,
  sessionListRoute,
  sessionObjectRoute,
  sessionRoute,
} from '#shared/protocol/sessions';
import { readAllBytes } from '#shared/protocol/streams';

import type { AuthenticatedCall } from './http/pipeline';
import { json } from './http/request';
import { registerRoute, specHandler, type SpecHandlerOptions } from './http/route';

/**
 * Session archives (docs/archives.md), declared in shared/protocol/sessions.ts. Every route works
 * for the caller's tenant: a session belongs to the tenant that first wrote to it; another
 * tenant's write is 403 `tenant mismatch`, its read 404. Without the session index every route
 * answers 501 whatever its input.
 */

/**
 * Files up to this size are read and verified before the answer starts, so a damaged one is a clean
 * 500 `integrity_error`. Larger files stream with Content-Length; a hash mismatch then cuts the
 * connection before the last bytes, so a client never receives a complete, wrong file.
 */
const VERIFY_BEFORE_SENDING_BYTES = 1024 * 1024;

function archiveOf(call: AuthenticatedCall): SessionArchive {
  const archive = call.services.sessionArchive;
  if (archive === undefined) {
    throw new NotConfiguredError(
      'CAIRN_TABLE_ENDPOINT',
      'session archives are not configured: set CAIRN_TABLE_ENDPOINT (the session index)',
    );
  }
  return archive;
}

const requireArchive: SpecHandlerOptions = { before: (call) => void archiveOf(call) };

export const sessionList = specHandler(
  sessionListRoute,
  {
    GET: async ({ query }, _request, call) => {
      const page = await archiveOf(call).listSessions(call.principal.tenant, {
        limit: query.limit,
        ...(query.after === undefined ? {} : { after: query.after }),
      });
      return json(200, { sessions: page.sessions, next: page.next });
    },
  },
  requireArchive,
);

export const session = specHandler(
  sessionRoute,
  {
    GET: async ({ params: { sid } }, _request, call) =>
      json(200, await archiveOf(call).getSession(call.principal.tenant, sid)),
  },
  requireArchive,
);

export const sessionObject = specHandler(
  sessionObjectRoute,
  {
    PUT: async ({ params: { sid, objectKey }, body }, _request, call) => {
      const { created } = await archiveOf(call).putObject(call.principal.tenant, sid, objectKey, body);
      return json(created ? 201 : 200, { key: objectKey, size: body.length });
    },
    GET: async ({ params: { sid, objectKey } }, _request, call) => {
      const bytes = await archiveOf(call).getObject(call.principal.tenant, sid, objectKey);
      return { status: 200, body: bytes, headers: { 'content-type': 'application/octet-stream' } };
    },
  },
  requireArchive,
);

export const sessionCheckpoints = specHandler(
  sessionCheckpointsRoute,
  {
    POST: async ({ params: { sid }, body }, _request, call) =>
      json(
        201,
        await archiveOf(call).publishCheckpoint(call.principal.tenant, sid, body, actorOf(call.principal)),
      ),
  },
  requireArchive,
);

export const sessionCheckpoint = specHandler(
  sessionCheckpointRoute,
  {
    GET: async ({ params: { sid, cid } }, _request, call) =>
      json(200, await archiveOf(call).readManifest(call.principal.tenant, sid, cid)),
  },
  requireArchive,
);

export const sessionFile = specHandler(
  sessionFileRoute,
  {
    GET: async ({ params: { sid, cid, path } }, _request, call): Promise<HttpResponseInit> => {
      const { file, stream } = await archiveOf(call).restoreFile(call.principal.tenant, sid, cid, path);
      const headers = {
        'content-type': 'application/octet-stream',
        'content-length': String(file.size),
        // RFC 9530: lets any client check the bytes it received.
        'repr-digest': `sha-256=:${Buffer.from(file.sha256, 'hex').toString('base64')}:`,
      };
      if (file.size > VERIFY_BEFORE_SENDING_BYTES) return { status: 200, body: stream, headers };
      // Read whole (the stream verifies the hash before its end): a failure is still a clean 500.
      return { status: 200, body: await readAllBytes(stream), headers };
    },
  },
  requireArchive,
);

registerRoute(sessionList);
registerRoute(session);
registerRoute(sessionObject);
registerRoute(sessionCheckpoints);
registerRoute(sessionCheckpoint);
registerRoute(sessionFile);
