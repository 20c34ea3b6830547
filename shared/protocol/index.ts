import { auditHeadsRoute, auditRecordsRoute, auditVerifyRoute } from './audit.js';
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
} from './coordination.js';
import { keysRoute, kvRoute } from './kv.js';
import { mcpRoute } from './mcp.js';
import { memoryBatchRoute, memoryFactRoute, memoryNamespacesRoute, memorySearchRoute } from './memory.js';
import { migrationStatusRoute, startMigrationRoute } from './migrations.js';
import { retentionPolicyRoute, retentionPruneRoute, tenantsRoute, verifyRoute } from './retention.js';
import { rewrapStatusRoute, startRewrapRoute } from './rewrap.js';
import { healthReadyRoute, healthRoute, notFoundRoute, openApiRoute } from './service.js';
import {
  sessionCheckpointRoute,
  sessionCheckpointsRoute,
  sessionFileRoute,
  sessionListRoute,
  sessionObjectRoute,
  sessionRoute,
} from './sessions.js';
import {
  snapshotByIdRoute,
  snapshotKeysRoute,
  snapshotPartsRoute,
  workspaceSnapshotRoute,
  workspaceSnapshotsRoute,
} from './snapshots.js';
import type { RouteSpec } from './spec.js';
import { THREAD_ROUTES } from './threads.js';

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
