import { auditHeadsRoute, auditRecordsRoute, auditVerifyRoute } from './audit';
import { keysRoute, kvRoute } from './kv';
import { memoryBatchRoute, memoryFactRoute, memoryNamespacesRoute, memorySearchRoute } from './memory';
import { migrationStatusRoute, startMigrationRoute } from './migrations';
import { retentionPolicyRoute, retentionPruneRoute, tenantsRoute, verifyRoute } from './retention';
import { rewrapStatusRoute, startRewrapRoute } from './rewrap';
import { healthReadyRoute, healthRoute, notFoundRoute, openApiRoute } from './service';
import {
  snapshotByIdRoute,
  snapshotKeysRoute,
  snapshotPartsRoute,
  workspaceSnapshotRoute,
  workspaceSnapshotsRoute,
} from './snapshots';
import type { RouteSpec } from './spec';

/**
 * Every route declared as data, in the order the document lists them. A route the app registers
 * is either here or still documented by hand in shared/api/openapi.ts (its list of hand-written
 * paths); a test holds the registrations to both.
 */
export const ROUTE_SPECS: readonly RouteSpec[] = [
  healthRoute,
  healthReadyRoute,
  openApiRoute,
  kvRoute,
  keysRoute,
  auditRecordsRoute,
  auditVerifyRoute,
  auditHeadsRoute,
  startMigrationRoute,
  migrationStatusRoute,
  startRewrapRoute,
  rewrapStatusRoute,
  retentionPolicyRoute,
  retentionPruneRoute,
  verifyRoute,
  tenantsRoute,
  workspaceSnapshotsRoute,
  snapshotPartsRoute,
  workspaceSnapshotRoute,
  snapshotByIdRoute,
  snapshotKeysRoute,
  memoryFactRoute,
  memorySearchRoute,
  memoryNamespacesRoute,
  memoryBatchRoute,
  notFoundRoute,
];
