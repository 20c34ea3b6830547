import { actorOf } from '#shared/auth';
import { NotFoundError } from '#shared/protocol/errors';
import {
  snapshotByIdRoute,
  snapshotKeysRoute,
  snapshotPartsRoute,
  workspaceSnapshotRoute,
  workspaceSnapshotsRoute,
} from '#shared/protocol/snapshots';
import type { StoredSnapshot } from '#shared/snapshots/workspaceSnapshots';

import { json } from './http/request';
import { registerRoute, specHandler } from './http/route';

/**
 * Signed workspace snapshots (docs/snapshots.md), declared in shared/protocol/snapshots.ts. Every
 * route works in the caller's tenant: the storage location comes from the credential, so another
 * tenant's snapshot answers 404 like an absent one. Parts are shared by all of a tenant's
 * workspaces; the workspace in their route is validated but does not scope them. The snapshot
 * store validates the names of the path.
 */

function snapshotJson(snapshot: StoredSnapshot) {
  return {
    id: snapshot.id,
    workspaceId: snapshot.workspaceId,
    manifest: snapshot.manifest.toString('base64'),
    signature: snapshot.signature.toString('base64'),
  };
}

export const snapshotParts = specHandler(snapshotPartsRoute, {
  PUT: async ({ params: { workspaceId, sha256, part }, body }, _request, call) => {
    const { created } = await call.services.snapshots.putPart(
      call.principal.tenant,
      workspaceId,
      sha256,
      part,
      body,
    );
    return json(created ? 201 : 200, { sha256, part: Number(part), size: body.length });
  },
  GET: async ({ params: { workspaceId, sha256, part } }, _request, call) => {
    const bytes = await call.services.snapshots.getPart(call.principal.tenant, workspaceId, sha256, part);
    return { status: 200, body: bytes, headers: { 'content-type': 'application/octet-stream' } };
  },
  HEAD: async ({ params: { workspaceId, sha256, part } }, _request, call) => {
    try {
      const size = await call.services.snapshots.headPart(call.principal.tenant, workspaceId, sha256, part);
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

export const workspaceSnapshots = specHandler(workspaceSnapshotsRoute, {
  POST: async ({ params: { workspaceId }, body }, _request, call) => {
    const result = await call.services.snapshots.publish(
      call.principal.tenant,
      workspaceId,
      body,
      actorOf(call.principal),
    );
    return json(201, result);
  },
  GET: async ({ params: { workspaceId }, query }, _request, call) => {
    const page = await call.services.snapshots.list(call.principal.tenant, workspaceId, {
      limit: query.limit,
      ...(query.cursor === undefined ? {} : { cursor: query.cursor }),
    });
    return json(200, page);
  },
});

export const workspaceSnapshot = specHandler(workspaceSnapshotRoute, {
  GET: async ({ params: { workspaceId, snapshotId } }, _request, call) =>
    json(
      200,
      snapshotJson(await call.services.snapshots.read(call.principal.tenant, workspaceId, snapshotId)),
    ),
  DELETE: async ({ params: { workspaceId, snapshotId } }, _request, call) =>
    json(200, await call.services.snapshots.delete(call.principal.tenant, workspaceId, snapshotId)),
});

export const snapshotById = specHandler(snapshotByIdRoute, {
  GET: async ({ params: { snapshotId } }, _request, call) =>
    json(200, snapshotJson(await call.services.snapshots.find(call.principal.tenant, snapshotId))),
});

export const snapshotKeys = specHandler(snapshotKeysRoute, {
  GET: async ({ params: { tenant } }, _request, call) =>
    json(200, { tenant, ...(await call.services.trustedSnapshotKeys.describe(tenant)) }),
  PUT: async ({ params: { tenant }, body: { keys } }, _request, call) =>
    json(200, { tenant, ...(await call.services.trustedSnapshotKeys.setRuntime(tenant, keys)) }),
  DELETE: async ({ params: { tenant } }, _request, call) => {
    await call.services.trustedSnapshotKeys.clearRuntime(tenant);
    return { status: 204 };
  },
});

registerRoute(workspaceSnapshots);
registerRoute(snapshotParts);
registerRoute(workspaceSnapshot);
registerRoute(snapshotById);
registerRoute(snapshotKeys);
