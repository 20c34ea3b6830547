export type { Manifest, ManifestFile } from '../shared/archive/manifest';
export type {
  ArchiveClientOptions,
  PublishOptions,
  PublishReport,
  RestoreReport,
  SessionPage,
  SessionRecord,
} from './archiveClient';
export { ArchiveClient, StaleCheckpointError } from './archiveClient';
export type { AuditPage, AuditRecord, AuditRecordQuery, SignedHead, VerifyResult } from './auditClient';
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
  MigrationReport,
  MigrationRequest,
  MigrationSource,
  MigrationStatus,
  WaitOptions,
} from './migrationsClient';
export { MigrationsClient } from './migrationsClient';
export type { HttpReply, HttpRequestSpec, HttpSender, RequestOptions, TransportOptions } from './transport';
export { nodeHttpSender, Transport } from './transport';
