import type { HttpRequest, HttpResponseInit } from '@azure/functions';
import { z } from 'zod';

import { ID_RULE } from '#shared/archive/identifiers';
import { publishRequestSchema } from '#shared/archive/manifest';
import type { SessionArchive } from '#shared/archive/sessionArchive';
import { actorOf } from '#shared/auth';
import { NotConfiguredError } from '#shared/errors';
import { MAX_OBJECT_BYTES } from '#shared/storage/immutableObjectStore';
import { readAllBytes } from '#shared/streams';

import { type AuthenticatedCall, httpHandler, registerHttp } from './http/pipeline';
import { json, parseQuery, readBody } from './http/request';
import { readJsonBody } from './jsonBody';

/**
 * Session archives (docs/archives.md). Every route works for the caller's tenant: a session belongs to the
 * tenant that first wrote to it; another tenant's write is 403 `tenant mismatch`, its read 404.
 */

/** A publish body: up to 128 files with paths of up to 1 KiB, plus 16 KiB of `data`. */
const MAX_PUBLISH_BODY_BYTES = 512 * 1024;
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

const param = (request: HttpRequest, name: string) => request.params[name] ?? '';

const LIMIT_RULE = 'must be a whole number from 1 to 1000';
const sessionListQuery = z.object({
  after: z
    .string()
    .regex(/^[A-Za-z0-9._-]{0,128}$/, ID_RULE)
    .optional(),
  limit: z.coerce
    .number({ error: LIMIT_RULE })
    .int(LIMIT_RULE)
    .min(1, LIMIT_RULE)
    .max(1000, LIMIT_RULE)
    .default(100),
});

export const sessionList = httpHandler('sessionList', {
  GET: async (request, call) => {
    const query = parseQuery(request, sessionListQuery);
    const page = await archiveOf(call).listSessions(call.principal.tenant, {
      limit: query.limit,
      ...(query.after === undefined ? {} : { after: query.after }),
    });
    return json(200, { sessions: page.sessions, next: page.next });
  },
});

export const session = httpHandler('session', {
  GET: async (request, call) =>
    json(200, await archiveOf(call).getSession(call.principal.tenant, param(request, 'sid'))),
});

export const sessionObject = httpHandler('sessionObject', {
  PUT: async (request, call) => {
    const body = await readBody(request, MAX_OBJECT_BYTES);
    const objectKey = param(request, 'objectKey');
    const { created } = await archiveOf(call).putObject(
      call.principal.tenant,
      param(request, 'sid'),
      objectKey,
      body,
    );
    return json(created ? 201 : 200, { key: objectKey, size: body.length });
  },
  GET: async (request, call) => {
    const bytes = await archiveOf(call).getObject(
      call.principal.tenant,
      param(request, 'sid'),
      param(request, 'objectKey'),
    );
    return { status: 200, body: bytes, headers: { 'content-type': 'application/octet-stream' } };
  },
});

export const sessionCheckpoints = httpHandler('sessionCheckpoints', {
  POST: async (request, call) => {
    const publish = await readJsonBody(request, MAX_PUBLISH_BODY_BYTES, publishRequestSchema);
    const result = await archiveOf(call).publishCheckpoint(
      call.principal.tenant,
      param(request, 'sid'),
      publish,
      actorOf(call.principal),
    );
    return json(201, result);
  },
});

export const sessionCheckpoint = httpHandler('sessionCheckpoint', {
  GET: async (request, call) =>
    json(
      200,
      await archiveOf(call).readManifest(call.principal.tenant, param(request, 'sid'), param(request, 'cid')),
    ),
});

export const sessionFile = httpHandler('sessionFile', {
  GET: async (request, call): Promise<HttpResponseInit> => {
    const { file, stream } = await archiveOf(call).restoreFile(
      call.principal.tenant,
      param(request, 'sid'),
      param(request, 'cid'),
      param(request, 'path'),
    );
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
});

registerHttp('sessionList', 'sessions', sessionList);
registerHttp('session', 'sessions/{sid}', session);
registerHttp('sessionObject', 'sessions/{sid}/objects/{*objectKey}', sessionObject);
registerHttp('sessionCheckpoints', 'sessions/{sid}/checkpoints', sessionCheckpoints);
registerHttp('sessionCheckpoint', 'sessions/{sid}/checkpoints/{cid}', sessionCheckpoint);
registerHttp('sessionFile', 'sessions/{sid}/checkpoints/{cid}/files/{*path}', sessionFile);
