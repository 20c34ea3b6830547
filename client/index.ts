export type { Manifest, ManifestFile } from '../shared/protocol/archive/manifest';
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
} from './archiveClient';
export { ArchiveClient, StaleCheckpointError } from './archiveClient';
export type {
  AuditPage,
  AuditRecord,
  AuditRecordQuery,
  SignedHead,
  VerifyAnswer,
  VerifyResult,
} from './auditClient';
export { AuditClient } from './auditClient';
export type { CairnClientOptions, Health } from './cairnClient';
export { CairnClient } from './cairnClient';
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
} from './coordinationClient';
export { CoordinationClient } from './coordinationClient';
export type { RewrapReport, RewrapStatus } from './encryptionClient';
export { EncryptionClient } from './encryptionClient';
export { CairnHttpError, CairnNetworkError, CairnTimeoutError } from './errors';
export type {
  KeyPage,
  ListOptions,
  StoredValue,
  ValueInfo,
  WriteConditions,
  WriteResult,
} from './keyValueClient';
export { KeyValueClient } from './keyValueClient';
export type {
  AgentMemoryConnection,
  AgentMemoryOptions,
  ByStateOptions,
  ConversationTurn,
  EmbeddingsLike,
  MemoryOptions,
  RecalledFact,
  RecallResult,
} from './memory/agentMemory';
export {
  AgentMemory,
  formatRecall,
  Memory,
  MEMORY_TOOLS,
  MemoryStateError,
  namespaceProblem,
  RECALL_HEADING,
  recallQuery,
} from './memory/agentMemory';
export type {
  MemoryFact,
  MemorySearchHit,
  MemorySearchOptions,
  MemorySearchResult,
  Namespace,
  NamespaceList,
  NamespaceListOptions,
  RememberOptions,
} from './memoryClient';
export { MemoryClient, namespacePath } from './memoryClient';
export type {
  MigrationReport,
  MigrationRequest,
  MigrationSource,
  MigrationStatus,
  WaitOptions,
} from './migrationsClient';
export { MigrationsClient } from './migrationsClient';
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
} from './retentionClient';
export { RetentionClient } from './retentionClient';
export { MissingPartsError, StaleParentError } from './snapshots/errors';
export type { LoadOptions, LoadReport } from './snapshots/load';
export type { SaveOptions, SaveProgress, SaveReport } from './snapshots/save';
export type { VerifyOptions, VerifyReport } from './snapshots/verify';
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
} from './snapshotsClient';
export { SnapshotsClient } from './snapshotsClient';
export type {
  ChannelVersion,
  CheckpointPage,
  CheckpointPut,
  HistoryOptions,
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
} from './threadsClient';
export { ThreadsClient } from './threadsClient';
export type { HttpReply, HttpRequestSpec, HttpSender, RequestOptions, TransportOptions } from './transport';
export { nodeHttpSender, Transport } from './transport';
