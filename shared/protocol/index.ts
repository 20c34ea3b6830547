import { auditHeadsRoute, auditRecordsRoute, auditVerifyRoute } from './audit';
import {
  chatClaimsRoute,
  chatCursorRoute,
  emailCursorClaimRoute,
  emailCursorInitRoute,
  emailCursorRoute,
  emailCursorSettleRoute,
  interactionDayRoute,
  interactionsRoute,
  promiseResolveRoute,
  promisesRoute,
  watchedChatsRoute,
} from './coordination';
import { keysRoute, kvRoute } from './kv';
import { mcpRoute } from './mcp';
import { memoryBatchRoute, memoryFactRoute, memoryNamespacesRoute, memorySearchRoute } from './memory';
import { migrationStatusRoute, startMigrationRoute } from './migrations';
import { retentionPolicyRoute, retentionPruneRoute, tenantsRoute, verifyRoute } from './retention';
import { rewrapStatusRoute, startRewrapRoute } from './rewrap';
import { healthReadyRoute, healthRoute, notFoundRoute, openApiRoute } from './service';
import {
  sessionCheckpointRoute,
  sessionCheckpointsRoute,
  sessionFileRoute,
  sessionListRoute,
  sessionObjectRoute,
  sessionRoute,
} from './sessions';
import {
  snapshotByIdRoute,
  snapshotKeysRoute,
  snapshotPartsRoute,
  workspaceSnapshotRoute,
  workspaceSnapshotsRoute,
} from './snapshots';
import type { RouteSpec } from './spec';
import { THREAD_ROUTES } from './threads';

/**
 * Every route declared as data, in the order the document lists them. Every route the app
 * registers is here; a test holds the registrations to this list both ways.
 */
export const ROUTE_SPECS: readonly RouteSpec[] = [
  healthRoute,
  healthReadyRoute,
  openApiRoute,
  kvRoute,
  keysRoute,
  sessionListRoute,
  sessionRoute,
  sessionObjectRoute,
  sessionCheckpointsRoute,
  sessionCheckpointRoute,
  sessionFileRoute,
  emailCursorRoute,
  emailCursorInitRoute,
  emailCursorClaimRoute,
  emailCursorSettleRoute,
  watchedChatsRoute,
  chatCursorRoute,
  chatClaimsRoute,
  promisesRoute,
  promiseResolveRoute,
  interactionsRoute,
  interactionDayRoute,
  ...THREAD_ROUTES,
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
  mcpRoute,
  notFoundRoute,
];
