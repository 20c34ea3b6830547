export type {
  ArchiveClientOptions,
  PublishOptions,
  PublishProgress,
  PublishReport,
  RestoreOptions,
  RestoreProgress,
  RestoreReport,
  SessionPage,
  SessionRecord,
} from './archiveClient.js';
export { ArchiveClient, StaleCheckpointError } from './archiveClient.js';
export type {
  AuditPage,
  AuditRecord,
  AuditRecordQuery,
  SignedHead,
  VerifyAnswer,
  VerifyResult,
} from './auditClient.js';
export { AuditClient } from './auditClient.js';
export type { CairnClientOptions, Health } from './cairnClient.js';
export { CairnClient } from './cairnClient.js';
export type {
  ChatClaim,
  ChatCursor,
  ChatCursorRead,
  EmailClaimRequest,
  EmailClaimResult,
  EmailCursorRead,
  InteractionEntry,
  NewInteraction,
  NewPromise,
  PromiseRecord,
  ReadOutcome,
  WatchedChatsRead,
  WatchedChatsWrite,
} from './coordinationClient.js';
export { CoordinationClient } from './coordinationClient.js';
export type { RewrapReport, RewrapStatus } from './encryptionClient.js';
export { EncryptionClient } from './encryptionClient.js';
export { CairnHttpError, CairnNetworkError, CairnTimeoutError } from './errors.js';
export type {
  KeyPage,
  ListOptions,
  StoredValue,
  ValueInfo,
  WriteConditions,
  WriteResult,
} from './keyValueClient.js';
export { KeyValueClient } from './keyValueClient.js';
export type {
  AgentMemoryConnection,
  AgentMemoryOptions,
  ByStateOptions,
  ConversationTurn,
  EmbeddingsLike,
  MemoryOptions,
  RecalledFact,
  RecallResult,
} from './memory/agentMemory.js';
export {
  AgentMemory,
  contentText,
  formatRecall,
  MAX_RECALL_QUERY_BYTES,
  Memory,
  MEMORY_TOOLS,
  MemoryStateError,
  namespaceProblem,
  RECALL_HEADING,
  recallQuery,
} from './memory/agentMemory.js';
export type {
  MemoryBatchOperation,
  MemoryBatchResult,
  MemoryFact,
  MemorySearchHit,
  MemorySearchOptions,
  MemorySearchResult,
  Namespace,
  NamespaceList,
  NamespaceListOptions,
  RememberOptions,
} from './memoryClient.js';
export { MemoryClient, namespacePath, vectorBase64 } from './memoryClient.js';
export type {
  MigrationReport,
  MigrationRequest,
  MigrationSource,
  MigrationStatus,
  WaitOptions,
} from './migrationsClient.js';
export { MigrationsClient } from './migrationsClient.js';
export type {
  DirectoryTenant,
  PruneReport,
  RetentionOverride,
  RetentionPolicy,
  RetentionPolicyView,
  ServiceVerifyReport,
  TenantPruneReport,
  TenantVerifyReport,
  VerifyFinding,
  VerifyOrphan,
} from './retentionClient.js';
export { RetentionClient } from './retentionClient.js';
export { MissingPartsError, StaleParentError } from './snapshots/errors.js';
export { readPrivateKey, readPublicKey, writeKeyPair } from './snapshots/keyFiles.js';
export type { LoadOptions, LoadReport } from './snapshots/load.js';
export { loadSnapshot } from './snapshots/load.js';
export type { SaveOptions, SaveProgress, SaveReport } from './snapshots/save.js';
export { saveSnapshot } from './snapshots/save.js';
export type { VerifyOptions, VerifyReport } from './snapshots/verify.js';
export { verifySnapshot } from './snapshots/verify.js';
export type {
  PartStored,
  PublishedSnapshot,
  PublishSnapshotRequest,
  SnapshotDeleteReport,
  SnapshotList,
  SnapshotPage,
  SnapshotSummary,
  StoredSnapshot,
  TrustedSnapshotKeys,
} from './snapshotsClient.js';
export { SnapshotsClient } from './snapshotsClient.js';
export type {
  ChannelVersion,
  CheckpointPage,
  CheckpointPut,
  HistoryOptions,
  KnownCheckpoint,
  PutCheckpointResult,
  RunInfo,
  RunStartOptions,
  RunStatus,
  StartedRun,
  StoredCheckpoint,
  StoredWrite,
  ThreadHead,
  ThreadInfo,
  ThreadListOptions,
  ThreadPage,
  TypedValue,
  WritesPut,
} from './threadsClient.js';
export { ThreadsClient } from './threadsClient.js';
export type {
  HttpReply,
  HttpRequestSpec,
  HttpSender,
  RequestOptions,
  TransportOptions,
} from './transport.js';
export { nodeHttpSender, Transport } from './transport.js';
export type { Manifest, ManifestFile } from '@cairn-state/protocol/archive/manifest';
