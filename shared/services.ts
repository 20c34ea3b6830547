import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';

import type { BlobServiceClient } from '@azure/storage-blob';

import { archiveRewrapTarget } from './archive/archiveRewrap';
import { type ArchiveStorage, sealedArchiveStorage, SealedSessions } from './archive/sealedArchive';
import { archiveRepairCheck, SessionArchive } from './archive/sessionArchive';
import { sessionPrunePart } from './archive/sessionRetention';
import { sessionVerifyPart } from './archive/sessionVerify';
import { type AuditChainCheck, auditingOff } from './audit/auditChainCheck';
import type { AuditStore } from './audit/auditStore';
import { AuditTrail } from './audit/auditTrail';
import { noTransactionalAuditLog, type RepairCheck, type TransactionalAuditLog } from './audit/pending';
import { Authenticator, sha256Hex } from './auth';
import { type Config, loadConfig } from './config';
import { ChatCursorCache } from './coordination/chatCursorCache';
import { EmailPollTenantRegistry } from './coordination/emailPollTenants';
import type { EmailWindowQueue } from './coordination/emailWindowQueue';
import { interactionPrunePart } from './coordination/interactionRetention';
import { Encryption, type SealingCodec } from './crypto/encryption';
import { keyValueRewrapTarget, type RewrapTarget } from './crypto/rewrap';
import { SealingKeyValueStoreFactory } from './crypto/sealedKeyValueStore';
import { type PrunerOptions, RetentionPruner } from './jobs/retentionPrune';
import { Verifier, type VerifierOptions } from './jobs/verify';
import { processLogger } from './logging';
import { MemoryFacts, memoryRepairCheck } from './memory/memory';
import { memoryPrunePart } from './memory/memoryRetention';
import { memoryRewrapTarget } from './memory/memoryRewrap';
import type { MemoryStore } from './memory/memoryStore';
import type { MemorySnapshotStore } from './memory/searchSnapshot';
import { NotConfiguredError } from './protocol/errors';
import { SEAL_OVERHEAD } from './protocol/fields';
import { threadValueLimit } from './protocol/threads';
import { MAX_READINESS_MS, Readiness } from './readiness';
import type { PrunePart, VerifyPart } from './retention/parts';
import { RetentionPolicies } from './retention/policy';
import { PruneStates } from './retention/pruneState';
import { snapshotPrunePart } from './snapshots/snapshotRetention';
import { snapshotVerifyPart } from './snapshots/snapshotVerify';
import { TrustedSnapshotKeys } from './snapshots/trustedKeys';
import { snapshotRepairCheck, type SnapshotStores, WorkspaceSnapshots } from './snapshots/workspaceSnapshots';
import { AzureEmailWindowQueue } from './storage/azure/azureEmailWindowQueue';
import { BlobImmutableObjectStore } from './storage/azure/blobImmutableObjectStore';
import { BlobKeyValueStoreFactory } from './storage/azure/blobKeyValueStore';
import { BlobMemorySnapshots } from './storage/azure/blobMemorySnapshots';
import {
  createBlobServiceClient,
  createQueueServiceClient,
  createTableClient,
} from './storage/azure/clients';
import { readinessProbes } from './storage/azure/readinessProbes';
import { TableSessionIndex } from './storage/azure/sessionIndexTable';
import { TableAuditStore } from './storage/azure/tableAuditStore';
import { TableMemoryStore } from './storage/azure/tableMemoryStore';
import {
  type ImmutableObjectStore,
  MAX_OBJECT_BYTES,
  type RewritableObjectStore,
} from './storage/immutableObjectStore';
import type { KeyValueStore, KeyValueStoreFactory } from './storage/keyValueStore';
import { LocalAuditStore } from './storage/local/localAuditStore';
import { LocalImmutableObjectStore } from './storage/local/localImmutableObjectStore';
import { LocalKeyValueStoreFactory } from './storage/local/localKeyValueStore';
import { LocalMemorySnapshots } from './storage/local/localMemorySnapshots';
import { LocalMemoryStore } from './storage/local/localMemoryStore';
import { LocalSessionIndex } from './storage/local/localSessionIndex';
import type { SessionIndex } from './storage/sessionIndex';
import {
  recordingKeyValueStores,
  recordingMemoryStore,
  recordingSessionIndex,
  recordingSnapshotStores,
} from './tenants/recordingStores';
import { TenantDirectory } from './tenants/tenantDirectory';
import type { ThreadRecord } from './threads/records';
import { SealedThreadSpace } from './threads/sealedThreadSpace';
import { threadRepairCheck } from './threads/threadAudit';
import { threadPrunePart } from './threads/threadRetention';
import { threadRewrapTarget } from './threads/threadRewrap';
import { ThreadStore } from './threads/threadStore';
import { threadVerifyPart } from './threads/threadVerify';

/**
 * The composition root, the one place that decides which implementation serves each storage
 * contract: configuration, one client per storage service, the stores and the authenticator, built
 * once per process from the validated settings and shared by every function.
 */
/**
 * The memory facts, or 501 `not_configured` naming the setting that turns them on (the Blob
 * backend without CAIRN_TABLE_ENDPOINT): one answer for the HTTP routes and the MCP tools.
 */
export function configuredMemory(services: Services): MemoryFacts {
  if (services.memory === undefined) {
    throw new NotConfiguredError(
      'CAIRN_TABLE_ENDPOINT',
      'memory is not configured: set CAIRN_TABLE_ENDPOINT (memory facts live in Table Storage with the Blob backend)',
    );
  }
  return services.memory;
}

export interface Services {
  readonly config: Config;
  readonly version: string;
  /** Every tenant's key/value and thread spaces; writes record the tenant in `tenants` first. */
  readonly kvStores: KeyValueStoreFactory;
  /** Every tenant that stored anything, by domain (retention and verify walk it). */
  readonly tenants: TenantDirectory;
  readonly authenticator: Authenticator;
  /** The tenants the emailWindowPoll timer serves (kept in the key/value store). */
  readonly emailPollRegistry: EmailPollTenantRegistry;
  /** Chat cursor versions this instance knows (a compare-and-swap hint only: see ChatCursorCache). */
  readonly chatCursorCache: ChatCursorCache;
  /** The email-window queue; undefined when CAIRN_QUEUE_ENDPOINT is not set. */
  readonly emailWindowQueue?: EmailWindowQueue;
  /**
   * Session archives; undefined with the Blob backend and no CAIRN_TABLE_ENDPOINT (the session
   * index). The local backend without a table service keeps its index under the data folder.
   */
  readonly sessionArchive?: SessionArchive;
  /** Signed workspace snapshots, in each tenant's own location of the configured backend. */
  readonly snapshots: WorkspaceSnapshots;
  /** The public keys each tenant's snapshots must be signed with (CAIRN_SNAPSHOT_KEYS and run time). */
  readonly trustedSnapshotKeys: TrustedSnapshotKeys;
  /** Threads, checkpoints and runs, in each tenant's `threads` space of the key/value backend. */
  readonly threads: ThreadStore;
  /**
   * Memory facts: on Table Storage when CAIRN_TABLE_ENDPOINT is set, else on the local filesystem
   * with the local backend; undefined with the Blob backend and no table service (the memory
   * routes then answer 501 `not_configured` naming CAIRN_TABLE_ENDPOINT: facts must not silently stay on one
   * instance's disk while the rest of the data is shared).
   */
  readonly memory?: MemoryFacts;
  /** Encryption at rest: the key check, the registry of tenants with sealed values. */
  readonly encryption: Encryption;
  /**
   * The process's one codec (CAIRN_ENCRYPTION_KEYS): every store that seals values uses it (the
   * thread store, sealed key/value spaces, memory facts). Seals nothing when no key is configured.
   */
  readonly codec: SealingCodec;
  /** What the `rewrap` job re-seals, by target name (`threads`, `kv` and, when configured, `memory`). */
  readonly rewrapTargets: ReadonlyMap<string, RewrapTarget>;
  /**
   * The process's one audit log (CAIRN_AUDIT): every store that records actions uses it (threads,
   * archives, memory facts, snapshots, admin jobs). Keeps nothing when auditing is off.
   */
  readonly audit: TransactionalAuditLog;
  /** The audit trail itself (reads, verify, signed heads, repair); undefined when auditing is off. */
  readonly auditTrail?: AuditTrail;
  /** Per-tenant retention overrides over the CAIRN_RETENTION_* defaults. */
  readonly retentionPolicies: RetentionPolicies;
  /** The retentionPrune run (the timer and the admin route), bounded by CAIRN_PRUNE_MAX_*. */
  readonly pruner: RetentionPruner;
  /** `cairn verify`: checks what each tenant keeps. */
  readonly verifier: Verifier;
  /** Whether every configured store answers (`GET /api/health/ready`). */
  readonly readiness: Readiness;
}

/** The actor of what the retentionPrune run does, in the audit trail. */
const RETENTION_ACTOR = 'retention';

export function createServices(config: Config): Services {
  const { backend } = config;
  const blobService =
    backend.kind === 'blob' ? createBlobServiceClient(backend, config.storageTimeoutMs) : undefined;
  const kvFactory = (maxValueBytes: number): KeyValueStoreFactory =>
    backend.kind === 'blob' && blobService !== undefined
      ? new BlobKeyValueStoreFactory(blobService, backend.container, maxValueBytes, config.storageTimeoutMs)
      : new LocalKeyValueStoreFactory(config.dataDir, maxValueBytes);
  /** The backend as it stores bytes: no value sealed on the way, no tenant recorded. */
  const baseKv = kvFactory(config.maxValueBytes);
  // The directory itself lives in the system namespace, which is never a tenant: not recorded.
  const tenants = new TenantDirectory(baseKv);
  /** The backend, recording each tenant in the directory before its first write. */
  const rawKv = recordingKeyValueStores(baseKv, tenants);
  const { tenantPolicy } = config.encryption;
  const encryption = new Encryption({ keys: config.encryption.keys, kvStores: baseKv, policy: tenantPolicy });
  const codec = encryption.codec;
  const sealsSomeKv = encryption.enabled && (tenantPolicy === '*' || tenantPolicy.size > 0);
  // Sealed key/value values carry a fixed overhead: their store takes values that much larger,
  // so that a value of the limit still fits once sealed (the sealed store checks the plain limit).
  const roomyKv = sealsSomeKv
    ? recordingKeyValueStores(kvFactory(config.maxValueBytes + SEAL_OVERHEAD), tenants)
    : rawKv;
  const kvStores = sealsSomeKv ? new SealingKeyValueStoreFactory(rawKv, roomyKv, codec, tenantPolicy) : rawKv;
  /** A tenant's thread space as the thread store and retention read it: sealed when keys are set. */
  const threadSpaceOf = (tenant: string): KeyValueStore => {
    const space = rawKv.forSpace('threads', tenant);
    return encryption.enabled ? new SealedThreadSpace(space, tenant, codec) : space;
  };
  const { queueService, queueName } = config.emailPoll;
  const emailWindowQueue =
    queueService === undefined
      ? undefined
      : new AzureEmailWindowQueue(
          createQueueServiceClient(queueService, config.storageTimeoutMs).getQueueClient(queueName),
          config.storageTimeoutMs,
        );
  const storedSessions = createSessionStorage(config, tenants, blobService);
  const sealedSessions = new SealedSessions(baseKv);
  const sessionStorage =
    storedSessions === undefined
      ? undefined
      : sealedArchiveStorage({ ...storedSessions, codec, policy: tenantPolicy, sessions: sealedSessions });
  const trustedSnapshotKeys = new TrustedSnapshotKeys(config.snapshotKeys, kvStores);
  const snapshotStores = recordingSnapshotStores(createSnapshotStores(config, blobService), tenants);
  const plainMemoryStore = createMemoryStore(config);
  const memoryStore =
    plainMemoryStore === undefined ? undefined : recordingMemoryStore(plainMemoryStore, tenants);
  // How the audit trail's repair tells whether an action committed: each domain's own check, over
  // the same stores its domain writes.
  const auditTrail = createAuditTrail(config, [
    threadRepairCheck(threadSpaceOf),
    snapshotRepairCheck(snapshotStores),
    ...(memoryStore === undefined ? [] : [memoryRepairCheck(memoryStore)]),
    ...(sessionStorage === undefined ? [] : [archiveRepairCheck(sessionStorage)]),
  ]);
  const audit = auditTrail ?? noTransactionalAuditLog;
  const sessionArchive = sessionStorage === undefined ? undefined : new SessionArchive(sessionStorage, audit);
  const snapshots = new WorkspaceSnapshots(snapshotStores, trustedSnapshotKeys, { audit });
  const memory =
    memoryStore === undefined
      ? undefined
      : new MemoryFacts({
          store: memoryStore,
          codec,
          audit,
          snapshots: createMemorySnapshots(config, blobService),
        });
  const threads = new ThreadStore({
    storeOf: threadSpaceOf,
    maxValueBytes: threadValueLimit(rawKv.maxValueBytes, encryption.enabled),
    sealed: encryption.enabled,
    audit,
  });
  const rewrapTargets = [
    threadRewrapTarget(rawKv, codec),
    keyValueRewrapTarget(roomyKv, codec, tenantPolicy),
    ...(memoryStore === undefined || memory === undefined
      ? []
      : [memoryRewrapTarget(memoryStore, codec, (tenant) => memory.dropAllSnapshots(tenant))]),
    ...(storedSessions === undefined
      ? []
      : [
          archiveRewrapTarget(
            { objects: storedSessions.roomy, index: storedSessions.index, sessions: sealedSessions },
            codec,
            tenantPolicy,
          ),
        ]),
  ];
  const retentionPolicies = new RetentionPolicies(baseKv, config.retention.defaults);
  const retentionStores: RetentionStores = {
    kvStores,
    threadSpaceOf,
    threadsSealed: encryption.enabled,
    deleteThreadRecord: (tenant, threadId, record, etag) =>
      threads.deleteThreadRecord(tenant, threadId, record, etag, RETENTION_ACTOR),
    directory: tenants,
    policies: retentionPolicies,
    states: new PruneStates(baseKv),
    ...(memory === undefined ? {} : { memory }),
    // Retention and verify read only ids and times of the index: the stored index, so that a record
    // whose sealed `data` does not open is no obstacle to them (verify opens each record's data
    // apart, to report one that does not open).
    ...(sessionStorage === undefined || storedSessions === undefined
      ? {}
      : {
          sessions: {
            objectsOf: sessionStorage.objectsOf,
            index: storedSessions.index,
            ...(sessionStorage.openIndexData === undefined
              ? {}
              : { openIndexData: sessionStorage.openIndexData }),
          },
        }),
    snapshots: snapshotStores,
  };
  return {
    config,
    version: packageVersion(),
    kvStores,
    tenants,
    authenticator: new Authenticator(config.apiKeys, config.entra),
    emailPollRegistry: new EmailPollTenantRegistry(kvStores),
    chatCursorCache: new ChatCursorCache(),
    threads,
    encryption,
    codec,
    rewrapTargets: new Map(rewrapTargets.map((target) => [target.name, target])),
    audit,
    ...(auditTrail === undefined ? {} : { auditTrail }),
    ...(emailWindowQueue === undefined ? {} : { emailWindowQueue }),
    ...(sessionArchive === undefined ? {} : { sessionArchive }),
    snapshots,
    trustedSnapshotKeys,
    ...(memory === undefined ? {} : { memory }),
    retentionPolicies,
    pruner: retentionPruner(retentionStores, {
      maxDeletes: config.retention.maxDeletes,
      maxMs: config.retention.maxSeconds * 1000,
    }),
    verifier: retentionVerifier({ ...retentionStores, audit: auditChainCheckOf(auditTrail) }),
    readiness: new Readiness(
      readinessProbes(config, blobService),
      Math.min(config.storageTimeoutMs, MAX_READINESS_MS),
    ),
  };
}

/** Every store the retention jobs cover, as the composition root wires them. */
export interface RetentionStores {
  /** Every tenant's key/value and thread spaces. */
  readonly kvStores: KeyValueStoreFactory;
  /**
   * A tenant's thread space as the thread store reads it (sealed when encryption keys are set);
   * default: `kvStores.forSpace('threads', tenant)`.
   */
  readonly threadSpaceOf?: (tenant: string) => KeyValueStore;
  /** True when thread values are sealed: their keys carry random ids, not digests (verify opens them). */
  readonly threadsSealed?: boolean;
  /**
   * Deletes a thread record whose time to live ran out, compare-and-swap on `etag`
   * (PreconditionFailedError when it changed; false when it was gone): the thread store's own
   * deletion, which records `thread.deleted` in the audit trail. Default: the space's delete.
   */
  readonly deleteThreadRecord?: (
    tenant: string,
    threadId: string,
    record: ThreadRecord,
    etag: string,
  ) => Promise<boolean>;
  readonly directory: TenantDirectory;
  readonly policies: RetentionPolicies;
  readonly states: PruneStates;
  readonly memory?: MemoryFacts;
  /** The session archive's objects and index (absent without a table service). */
  readonly sessions?: ArchiveStorage;
  readonly snapshots: SnapshotStores;
}

/** A tenant's thread space, as the thread store reads it. */
function threadSpaceOf(
  stores: Pick<RetentionStores, 'kvStores' | 'threadSpaceOf'>,
): (tenant: string) => KeyValueStore {
  return (tenant) => stores.threadSpaceOf?.(tenant) ?? stores.kvStores.forSpace('threads', tenant);
}

/**
 * The retentionPrune run over the domains' parts, in the order each tenant's pass runs them:
 * memory facts, threads, sessions, snapshots, interactions.
 */
export function retentionPruner(stores: RetentionStores, options: PrunerOptions): RetentionPruner {
  const parts: PrunePart[] = [
    ...(stores.memory === undefined ? [] : [memoryPrunePart(stores.memory)]),
    threadPrunePart(threadSpaceOf(stores), stores.deleteThreadRecord),
    ...(stores.sessions === undefined ? [] : [sessionPrunePart(stores.sessions)]),
    snapshotPrunePart(stores.snapshots),
    interactionPrunePart(stores.kvStores),
  ];
  const { directory, policies, states } = stores;
  return new RetentionPruner({ directory, policies, states, parts }, options);
}

/** `cairn verify` over the domains' parts: threads, sessions, snapshots, then the audit chain. */
export function retentionVerifier(
  stores: Omit<RetentionStores, 'policies' | 'states'> & { readonly audit: AuditChainCheck },
  options?: VerifierOptions,
): Verifier {
  const parts: VerifyPart[] = [
    threadVerifyPart(threadSpaceOf(stores), stores.threadsSealed === true),
    ...(stores.sessions === undefined ? [] : [sessionVerifyPart(stores.sessions)]),
    snapshotVerifyPart(stores.snapshots),
  ];
  return new Verifier({ directory: stores.directory, parts, audit: stores.audit }, options);
}

/** Blob names of snapshots start with this, in the container named exactly CAIRN_BLOB_CONTAINER. */
const SNAPSHOT_BLOB_PREFIX = 'snapshots/';

/**
 * Each tenant's snapshot objects: `<dataDir>/snapshots/<tenant>/...` locally (keys with a segment
 * over 255 bytes, which snapshots never make, would go to `<dataDir>/snapshots-long/<tenant>`), and
 * blobs `snapshots/<first 32 hex digits of SHA-256(tenant)>/...` in the container named exactly
 * CAIRN_BLOB_CONTAINER (tenant key/value containers are `<base>-<hash>` and archives use
 * `sessions/`, so names never collide). The location is always derived from the authenticated
 * tenant, never from anything a caller sends.
 */
function createSnapshotStores(config: Config, blobService?: BlobServiceClient): SnapshotStores {
  const { backend } = config;
  if (backend.kind === 'blob' && blobService !== undefined) {
    const container = blobService.getContainerClient(backend.container);
    return {
      forTenant: (tenant) =>
        new BlobImmutableObjectStore(
          container,
          `${SNAPSHOT_BLOB_PREFIX}${sha256Hex(tenant).slice(0, 32)}/`,
          config.storageTimeoutMs,
        ),
    };
  }
  const tmp = path.join(config.dataDir, 'tmp');
  return {
    forTenant: (tenant) =>
      new LocalImmutableObjectStore(
        path.join(config.dataDir, 'snapshots', tenant),
        tmp,
        path.join(config.dataDir, 'snapshots-long', tenant),
      ),
  };
}

/**
 * Where memory searches store their snapshots (shared/memory/searchSnapshot.ts): blobs under
 * `memory-snapshots/` in the container named exactly CAIRN_BLOB_CONTAINER on the Blob backend
 * (beside `snapshots/` and `sessions/`, so names never collide), else files under
 * `<dataDir>/memory-snapshots/`.
 */
function createMemorySnapshots(config: Config, blobService?: BlobServiceClient): MemorySnapshotStore {
  if (config.backend.kind === 'blob' && blobService !== undefined) {
    return new BlobMemorySnapshots(
      blobService.getContainerClient(config.backend.container),
      config.storageTimeoutMs,
    );
  }
  return new LocalMemorySnapshots(config.dataDir);
}

/** The store of memory facts: the table service when there is one, else local files on the local backend. */
function createMemoryStore(config: Config): MemoryStore | undefined {
  const { tableService, tableName } = config.memory;
  if (tableService !== undefined) {
    return new TableMemoryStore(createTableClient(tableService, tableName), config.storageTimeoutMs);
  }
  if (config.backend.kind === 'local') return new LocalMemoryStore(config.dataDir);
  return undefined;
}

/** Blob names of archives start with this, in the container named exactly CAIRN_BLOB_CONTAINER. */
const ARCHIVE_BLOB_PREFIX = 'sessions/';

/**
 * The archive objects of the configured backend. Session ids are global (a session belongs to the
 * tenant that first writes to it), so archives live outside the per-tenant key/value space:
 * `<dataDir>/sessions/<sid>/...` locally, blobs `sessions/<sid>/...` in the container named exactly
 * CAIRN_BLOB_CONTAINER on Blob (tenant containers are `<base>-<hash>`, so names never collide).
 */
function createArchiveObjectStore(
  config: Config,
  maxObjectBytes: number,
  blobService?: BlobServiceClient,
): RewritableObjectStore {
  const { backend } = config;
  if (backend.kind === 'blob' && blobService !== undefined) {
    return new BlobImmutableObjectStore(
      blobService.getContainerClient(backend.container),
      ARCHIVE_BLOB_PREFIX,
      config.storageTimeoutMs,
      undefined,
      maxObjectBytes,
    );
  }
  const root = path.join(config.dataDir, 'sessions');
  return new LocalImmutableObjectStore(root, path.join(config.dataDir, 'tmp'), undefined, maxObjectBytes);
}

/**
 * The session archive's objects and index as stored: the index in its table when there is a table
 * service (CAIRN_TABLE_ENDPOINT), else under the data folder on the local backend, else (the Blob
 * backend without a table service) undefined: the index must not stay on one instance's disk while
 * the archives are shared. The index records each tenant in the directory before its
 * first session. `roomy` is the same objects with a limit {@link SEAL_OVERHEAD} bytes larger, for
 * sealed objects of the plain limit.
 */
function createSessionStorage(
  config: Config,
  tenants: TenantDirectory,
  blobService?: BlobServiceClient,
): { plain: ImmutableObjectStore; roomy: RewritableObjectStore; index: SessionIndex } | undefined {
  const { tableService, tableName } = config.sessionIndex;
  let index: SessionIndex;
  if (tableService !== undefined) {
    index = new TableSessionIndex(createTableClient(tableService, tableName), config.storageTimeoutMs);
  } else if (config.backend.kind === 'local') {
    index = new LocalSessionIndex(config.dataDir);
  } else {
    return undefined;
  }
  return {
    plain: createArchiveObjectStore(config, MAX_OBJECT_BYTES, blobService),
    roomy: createArchiveObjectStore(config, MAX_OBJECT_BYTES + SEAL_OVERHEAD, blobService),
    index: recordingSessionIndex(index, tenants),
  };
}

/**
 * The audit trail, or undefined when auditing is off: in its table when there is a table service,
 * else (the local backend) under the data folder. The repair grace period is six
 * storage timeouts and half a minute: longer than any appender of an event can still be running
 * (it gives up at half of it), with room for the instances' clocks to differ.
 */
function createAuditTrail(config: Config, repairChecks: readonly RepairCheck[]): AuditTrail | undefined {
  const { audit } = config;
  if (!audit.enabled) return undefined;
  let store: AuditStore;
  if (audit.tableService !== undefined) {
    store = new TableAuditStore(
      createTableClient(audit.tableService, audit.tableName),
      config.storageTimeoutMs,
    );
  } else if (config.backend.kind === 'local') {
    store = new LocalAuditStore(config.dataDir);
  } else {
    return undefined;
  }
  return new AuditTrail({
    store,
    ...(audit.signingKey === undefined ? {} : { signingKey: audit.signingKey }),
    log: processLogger(config.logLevel).child({ component: 'audit' }),
    repairGraceMs: 6 * config.storageTimeoutMs + 30_000,
    repairChecks,
  });
}

/** `cairn verify`'s check of a tenant's audit chain: the trail's own verify, or not checked when off. */
function auditChainCheckOf(trail: AuditTrail | undefined): AuditChainCheck {
  if (trail === undefined) return auditingOff;
  return {
    check: async (tenant) => {
      const { ok, records, firstBroken } = await trail.verify(tenant);
      return ok || firstBroken === null
        ? { status: 'ok', records }
        : { status: 'broken', records, firstBroken };
    },
  };
}

let services: Services | undefined;

/** The process's services; the first call reads the configuration and throws when it is invalid. */
export function getServices(): Services {
  services ??= createServices(loadConfig());
  return services;
}

/** The version in Cairn's package.json (found upwards from here: sources and dist differ in depth). */
function packageVersion(): string {
  for (let dir = __dirname; ; dir = path.dirname(dir)) {
    const file = path.join(dir, 'package.json');
    if (existsSync(file)) {
      const pkg = JSON.parse(readFileSync(file, 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'cairn' && pkg.version !== undefined) return pkg.version;
    }
    if (path.dirname(dir) === dir) return '0.0.0';
  }
}
