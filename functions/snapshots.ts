import type { HttpRequest } from '@azure/functions';
import { z } from 'zod';

import { actorOf } from '#shared/auth';
import { NotFoundError } from '#shared/errors';
import { MAX_PUBLISH_BODY_BYTES } from '#shared/snapshots/manifest';
import { MAX_KEYS_BODY_BYTES } from '#shared/snapshots/trustedKeys';
import type { StoredSnapshot } from '#shared/snapshots/workspaceSnapshots';
import { MAX_OBJECT_BYTES } from '#shared/storage/immutableObjectStore';

import { requireAdmin } from './http/admin';
import { httpHandler, registerHttp } from './http/pipeline';
import { json, parseQuery, readBody } from './http/request';
import { readJsonBody } from './jsonBody';

/**
 * Signed workspace snapshots (docs/snapshots.md). Every route works in the caller's tenant: the
 * storage location comes from the credential, so another tenant's snapshot answers 404 like an
 * absent one. Parts are shared by all of a tenant's workspaces; the workspace in their route is
 * validated but does not scope them.
 */

const param = (request: HttpRequest, name: string) => request.params[name] ?? '';

const base64 = (what: string) =>
  z
    .string({ error: `must be ${what} in base64` })
    .refine(
      (value) => value.length % 4 === 0 && /^[A-Za-z0-9+/]*={0,2}$/.test(value),
      `must be ${what} in base64 (standard alphabet, padded)`,
    )
    .transform((value) => Buffer.from(value, 'base64'));

const publishBody = z.strictObject({
  manifest: base64('the exact manifest bytes'),
  signature: base64('the 64-byte Ed25519 signature of the manifest bytes'),
  parent: z
    .string({ error: 'must be the latest snapshot id, or null for the first' })
    .nullable()
    .default(null),
  allowExternalSymlinks: z.boolean({ error: 'must be true or false' }).default(false),
});

const LIMIT_RULE = 'must be a whole number from 1 to 1000';
const listQuery = z.object({
  limit: z.coerce
    .number({ error: LIMIT_RULE })
    .int(LIMIT_RULE)
    .min(1, LIMIT_RULE)
    .max(1000, LIMIT_RULE)
    .default(100),
  cursor: z.string().optional(),
});

const keysBody = z.strictObject({
  keys: z.array(z.string({ error: 'must be a base64 public key' }), {
    error: 'must be an array of base64 public keys',
  }),
});

function snapshotJson(snapshot: StoredSnapshot) {
  return {
    id: snapshot.id,
    workspaceId: snapshot.workspaceId,
    manifest: snapshot.manifest.toString('base64'),
    signature: snapshot.signature.toString('base64'),
  };
}

export const snapshotParts = httpHandler('snapshotParts', {
  PUT: async (request, call) => {
    const body = await readBody(request, MAX_OBJECT_BYTES);
    const sha256 = param(request, 'sha256');
    const part = param(request, 'part');
    const { created } = await call.services.snapshots.putPart(
      call.principal.tenant,
      param(request, 'workspaceId'),
      sha256,
      part,
      body,
    );
    return json(created ? 201 : 200, { sha256, part: Number(part), size: body.length });
  },
  GET: async (request, call) => {
    const bytes = await call.services.snapshots.getPart(
      call.principal.tenant,
      param(request, 'workspaceId'),
      param(request, 'sha256'),
      param(request, 'part'),
    );
    return { status: 200, body: bytes, headers: { 'content-type': 'application/octet-stream' } };
  },
  HEAD: async (request, call) => {
    try {
      const size = await call.services.snapshots.headPart(
        call.principal.tenant,
        param(request, 'workspaceId'),
        param(request, 'sha256'),
        param(request, 'part'),
      );
      return {
        status: 200,
        headers: { 'content-length': String(size), 'content-type': 'application/octet-stream' },
      };
    } catch (error) {
      // A HEAD answer has no body: the status says it.
      if (error instanceof NotFoundError) return { status: 404 };
      throw error;
    }
  },
});

export const workspaceSnapshots = httpHandler('workspaceSnapshots', {
  POST: async (request, call) => {
    const body = await readJsonBody(request, MAX_PUBLISH_BODY_BYTES, publishBody);
    const result = await call.services.snapshots.publish(
      call.principal.tenant,
      param(request, 'workspaceId'),
      body,
      actorOf(call.principal),
    );
    return json(201, result);
  },
  GET: async (request, call) => {
    const query = parseQuery(request, listQuery);
    const page = await call.services.snapshots.list(call.principal.tenant, param(request, 'workspaceId'), {
      limit: query.limit,
      ...(query.cursor === undefined ? {} : { cursor: query.cursor }),
    });
    return json(200, page);
  },
});

export const workspaceSnapshot = httpHandler('workspaceSnapshot', {
  GET: async (request, call) =>
    json(
      200,
      snapshotJson(
        await call.services.snapshots.read(
          call.principal.tenant,
          param(request, 'workspaceId'),
          param(request, 'snapshotId'),
        ),
      ),
    ),
  DELETE: async (request, call) =>
    json(
      200,
      await call.services.snapshots.delete(
        call.principal.tenant,
        param(request, 'workspaceId'),
        param(request, 'snapshotId'),
      ),
    ),
});

export const snapshotById = httpHandler('snapshotById', {
  GET: async (request, call) =>
    json(
      200,
      snapshotJson(await call.services.snapshots.find(call.principal.tenant, param(request, 'snapshotId'))),
    ),
});

export const snapshotKeys = httpHandler('snapshotKeys', {
  GET: async (request, call) => {
    requireAdmin(call, 'trusted snapshot keys');
    const tenant = param(request, 'tenant');
    return json(200, { tenant, ...(await call.services.trustedSnapshotKeys.describe(tenant)) });
  },
  PUT: async (request, call) => {
    requireAdmin(call, 'trusted snapshot keys');
    const tenant = param(request, 'tenant');
    const { keys } = await readJsonBody(request, MAX_KEYS_BODY_BYTES, keysBody);
    return json(200, { tenant, ...(await call.services.trustedSnapshotKeys.setRuntime(tenant, keys)) });
  },
  DELETE: async (request, call) => {
    requireAdmin(call, 'trusted snapshot keys');
    await call.services.trustedSnapshotKeys.clearRuntime(param(request, 'tenant'));
    return { status: 204 };
  },
});

registerHttp('workspaceSnapshots', 'workspaces/{workspaceId}/snapshots', workspaceSnapshots);
registerHttp('snapshotParts', 'workspaces/{workspaceId}/snapshots/objects/{sha256}/{part}', snapshotParts);
registerHttp('workspaceSnapshot', 'workspaces/{workspaceId}/snapshots/{snapshotId}', workspaceSnapshot);
registerHttp('snapshotById', 'snapshots/{snapshotId}', snapshotById);
registerHttp('snapshotKeys', 'snapshot-keys/{tenant}', snapshotKeys);
