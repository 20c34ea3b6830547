import type { KeyObject } from 'node:crypto';
import path from 'node:path';

import { Cron } from 'croner';
import { z } from 'zod';

import { type EncryptionKey, parseEncryptionKeys } from './crypto/encryptionKeys';
import { parsePrivateKey } from './protocol/audit/headSignature';
import { ConfigurationError } from './protocol/errors';
import { publicKeyFromBase64, publicKeyToBase64 } from './protocol/snapshots/signatures';
import { isValidTenantId, TENANT_ID_RULE } from './protocol/tenants/tenantIds';
import {
  KEEP_EVERYTHING,
  MAX_INTERACTION_DAYS,
  MAX_KEEP_CHECKPOINTS,
  MAX_TTL_SECONDS,
  type RetentionPolicy,
} from './retention/policy';

/**
 * Every setting Cairn reads, validated once at start-up into a typed {@link Config}. A missing or
 * invalid setting throws {@link ConfigurationError} naming it: the app refuses to start rather than
 * fall back silently (a silently-local fleet instance replays old messages).
 *
 * {@link SETTINGS} is the single list of setting names with their documentation; the README table,
 * `local.settings.sample.json` and the Bicep app settings are checked against it by tests.
 */

export interface SettingDoc {
  readonly description: string;
  /** `required` in which profile; `optional` otherwise. */
  readonly requiredIn?: 'blob';
}

export const SETTINGS = {
  CAIRN_KEEP_LOCAL: {
    description:
      'true/1/yes forces the local filesystem backend, even when blob settings are present; false/0/no or unset does not; any other value is refused.',
  },
  CAIRN_BLOB_ENDPOINT: {
    description:
      'Blob service URL (e.g. https://<account>.blob.core.windows.net). With CAIRN_BLOB_CONTAINER selects the Blob backend.',
    requiredIn: 'blob',
  },
  CAIRN_BLOB_CONTAINER: {
    description:
      'Base container name (3-39 chars, lowercase letters, digits, single hyphens). Each tenant gets the container <base>-<hash of tenant>.',
    requiredIn: 'blob',
  },
  CAIRN_STORAGE_ACCOUNT_KEY: {
    description:
      'Shared account key, for Azurite and development only. Unset in Azure: the managed identity is used.',
  },
  AZURE_CLIENT_ID: {
    description:
      'Client id of the user-assigned managed identity used for storage when no account key is set.',
    requiredIn: 'blob',
  },
  CAIRN_DATA_DIR: { description: 'Root folder of the local backend (default .cairn/data).' },
  CAIRN_MIGRATION_SOURCE_ROOTS: {
    description:
      'Folders on the host a migration may copy from (docs/migration.md): comma-separated absolute paths; a source root must be one of them or inside one. Default: none (every migration is refused with 400 naming this setting).',
  },
  CAIRN_API_KEYS: {
    description:
      'Comma-separated <tenant>:<sha256 hex of key>[:admin] entries. Keys are never stored in clear.',
  },
  CAIRN_ENCRYPTION_KEYS: {
    description:
      'Encryption at rest (AES-256-GCM, docs/encryption.md): comma-separated <id>:<64 hex> keys, e.g. k2:<64 hex>,k1:<64 hex>; ids 1-32 of [A-Za-z0-9._-]. The first seals new values, every one opens. Optional; empty: off.',
  },
  CAIRN_ENCRYPT_TENANTS: {
    description:
      "Tenants whose own-format bytes are sealed too: key/value values and session archives (objects, manifests, index data). Comma-separated tenant ids, or * for all; needs CAIRN_ENCRYPTION_KEYS. Default: none (those bytes are the caller's own format). A tenant whose values were sealed cannot be taken off again: the app refuses to start.",
  },
  CAIRN_AUDIT: {
    description:
      'true/1/yes turns the audit trail on (docs/audit.md); with the Blob backend it needs CAIRN_TABLE_ENDPOINT (the local backend without it keeps the trail under CAIRN_DATA_DIR). Off: the audit routes answer 501 not_configured naming this setting.',
  },
  CAIRN_AUDIT_TABLE: {
    description:
      'Name of the table of the audit trail (default cairnaudit; 3-63 letters and digits, starting with a letter; created when missing).',
  },
  CAIRN_AUDIT_SIGNING_KEY: {
    description:
      'Ed25519 private key that signs audit heads: PKCS#8 as PEM or as the base64 of its DER (cairn audit keygen prints one). Optional; empty: heads are not signed.',
  },
  CAIRN_AUDIT_SIGN_SCHEDULE: {
    description:
      'NCRONTAB schedule (six fields, seconds first) of the auditHeadSign timer (default 0 */5 * * * *: every five minutes).',
  },
  CAIRN_AUTH_ISSUER: { description: 'Entra ID token issuer (set all three CAIRN_AUTH_* or none).' },
  CAIRN_AUTH_AUDIENCE: { description: 'Entra ID token audience (the app registration).' },
  CAIRN_AUTH_JWKS_URI: { description: 'URL of the signing keys (JWKS) of the issuer.' },
  CAIRN_AUTH_TENANT_CLAIM: { description: 'Token claim that names the tenant (default oid).' },
  CAIRN_MAX_VALUE_BYTES: { description: 'Largest key/value value in bytes (default 2097152).' },
  CAIRN_STORAGE_TIMEOUT_MS: {
    description: 'Deadline of one storage operation, retries included, before it answers 503 (default 8000).',
  },
  CAIRN_LOG_LEVEL: {
    description: 'pino level: fatal, error, warn, info, debug, trace or silent (default info).',
  },
  CAIRN_HEAP_GROWING_PERCENT: {
    description:
      "How far the JavaScript heap may grow past what its last full garbage collection kept alive before the next one, in percent (default 30, at most 300; 0 leaves it to V8's own heuristics, which may let it grow to several times that). Lower keeps the instance's memory nearer what it uses, at the cost of more frequent collections (docs/benchmark-results.md).",
  },
  CAIRN_QUEUE_ENDPOINT: {
    requiredIn: 'blob',
    description:
      'Queue service URL (e.g. https://<account>.queue.core.windows.net) of the email-window queue; credentials as for Blob (CAIRN_STORAGE_ACCOUNT_KEY for Azurite, else AZURE_CLIENT_ID). Unset: the emailWindowPoll timer claims nothing and fails naming this setting.',
  },
  CAIRN_EMAIL_WINDOW_QUEUE: {
    description:
      'Name of the Azure Storage queue that receives claimed email windows (default email-windows; created when missing).',
  },
  CAIRN_EMAIL_POLL_SCHEDULE: {
    description:
      'NCRONTAB schedule (six fields, seconds first) of the emailWindowPoll timer (default 0 */1 * * * *: every minute).',
  },
  CAIRN_TABLE_ENDPOINT: {
    requiredIn: 'blob',
    description:
      'Table service URL (e.g. https://<account>.table.core.windows.net) of the session index and memory facts; credentials as for Blob (CAIRN_STORAGE_ACCOUNT_KEY for Azurite, else AZURE_CLIENT_ID). Unset: the local backend keeps the session index and memory facts (and the audit trail) under CAIRN_DATA_DIR; on the Blob backend the session and memory routes answer 501 not_configured naming this setting (npm start sets it to its Azurite for the Blob backend on that Azurite).',
  },
  CAIRN_SESSION_TABLE: {
    description:
      'Name of the table of the session index (default cairnsessions; 3-63 letters and digits, starting with a letter; created when missing).',
  },
  CAIRN_SNAPSHOT_KEYS: {
    description:
      'Trusted snapshot signing keys: comma-separated <tenant>:<base64 of the 32-byte raw Ed25519 public key> entries (cairn keygen prints the key), several per tenant allowed. A tenant with trusted keys (here or set by an admin at run time) can only publish snapshots signed by one of them.',
  },
  CAIRN_MEMORY_TABLE: {
    description:
      'Name of the table of memory facts on CAIRN_TABLE_ENDPOINT (default cairnmemory; 3-63 letters and digits, starting with a letter; created when missing). Without CAIRN_TABLE_ENDPOINT the local backend keeps facts under CAIRN_DATA_DIR and the Blob backend answers the memory routes with 501 not_configured.',
  },
  CAIRN_PRUNE_SCHEDULE: {
    description:
      'NCRONTAB schedule (six fields, seconds first) of the retentionPrune timer (default 0 0 * * * *: every hour, on the hour).',
  },
  CAIRN_PRUNE_MAX_SECONDS: {
    description:
      'How long one prune run works before it stops and leaves the rest to the next run (default 120, at most 3600; keep it well under the Functions timeout).',
  },
  CAIRN_PRUNE_MAX_DELETES: {
    description:
      'How many deletions one prune run attempts at most before it stops and leaves the rest to the next run (default 50000).',
  },
  CAIRN_RETENTION_THREAD_TTL_SECONDS: {
    description:
      'Default retention: delete threads whose last change is at least this many seconds old. Unset: keep threads. An admin can override it per tenant.',
  },
  CAIRN_RETENTION_KEEP_CHECKPOINTS: {
    description:
      "Default retention: keep each thread namespace's head and its n - 1 ancestors; older checkpoints and abandoned branches go. Unset: keep every checkpoint.",
  },
  CAIRN_RETENTION_DROP_BRANCHES: {
    description:
      'Default retention: true/1/yes deletes the branches rewinds leave behind (checkpoints on no head chain). Default false.',
  },
  CAIRN_RETENTION_SESSION_TTL_SECONDS: {
    description:
      'Default retention: delete archive sessions whose latest checkpoint was published at least this many seconds ago. Unset: keep sessions.',
  },
  CAIRN_RETENTION_INTERACTION_DAYS: {
    description:
      'Default retention: keep the interaction log of the last n UTC days (today included). Unset: keep every day.',
  },
} as const satisfies Record<string, SettingDoc>;

export type SettingName = keyof typeof SETTINGS;

export interface ApiKeyEntry {
  readonly tenant: string;
  /** Lowercase hex SHA-256 of the key. */
  readonly sha256: string;
  readonly admin: boolean;
}

export interface EntraConfig {
  readonly issuer: string;
  readonly audience: string;
  readonly jwksUri: string;
  readonly tenantClaim: string;
}

export type BackendConfig =
  | { readonly kind: 'local'; readonly dataDir: string }
  | {
      readonly kind: 'blob';
      readonly endpoint: string;
      readonly container: string;
      /** Account name for shared-key auth (Azurite/dev), derived from the endpoint. */
      readonly accountName: string;
      readonly accountKey?: string;
      readonly managedIdentityClientId?: string;
    };

/** An Azure Storage service other than Blob (the email-window queue), with the Blob credential rules. */
export interface StorageServiceConfig {
  readonly endpoint: string;
  /** Account name for shared-key auth (Azurite/dev), derived from the endpoint. */
  readonly accountName: string;
  readonly accountKey?: string;
  readonly managedIdentityClientId?: string;
}

export interface EmailPollConfig {
  /** NCRONTAB, six fields. */
  readonly schedule: string;
  readonly queueName: string;
  /** Unset: the timer cannot enqueue, so it claims nothing and fails naming CAIRN_QUEUE_ENDPOINT. */
  readonly queueService?: StorageServiceConfig;
}

/** Encryption at rest (docs/encryption.md). */
export interface EncryptionConfig {
  /** The first seals; every one opens. Empty: encryption off. */
  readonly keys: readonly EncryptionKey[];
  /** Tenants whose key/value spaces and session archives are sealed: `*` for all. */
  readonly tenantPolicy: '*' | ReadonlySet<string>;
}

/** The audit trail (docs/audit.md). */
export interface AuditConfig {
  readonly enabled: boolean;
  readonly tableName: string;
  /** Set whenever `enabled` on the Blob backend; unset on the local backend: the trail is under the data folder. */
  readonly tableService?: StorageServiceConfig;
  /** Signs the trail's heads; undefined: heads are not signed. */
  readonly signingKey?: KeyObject;
  /** NCRONTAB, six fields. */
  readonly signSchedule: string;
}

export interface Config {
  readonly backend: BackendConfig;
  readonly dataDir: string;
  /** Absolute, normalised folders migrations may copy from (CAIRN_MIGRATION_SOURCE_ROOTS). */
  readonly migrationSourceRoots: readonly string[];
  readonly apiKeys: readonly ApiKeyEntry[];
  readonly entra?: EntraConfig;
  readonly maxValueBytes: number;
  readonly storageTimeoutMs: number;
  /** CAIRN_HEAP_GROWING_PERCENT: applied at start-up by `applyHeapGrowth` (shared/heapGrowth.ts). */
  readonly heapGrowingPercent: number;
  readonly logLevel: string;
  readonly emailPoll: EmailPollConfig;
  readonly sessionIndex: SessionIndexConfig;
  /** Tenant → trusted snapshot public keys (base64 of the raw 32 bytes), from CAIRN_SNAPSHOT_KEYS. */
  readonly snapshotKeys: ReadonlyMap<string, readonly string[]>;
  readonly memory: MemoryConfig;
  readonly encryption: EncryptionConfig;
  readonly audit: AuditConfig;
  readonly retention: RetentionConfig;
}

/** The retention policy defaults and the retentionPrune timer's schedule and budget. */
export interface RetentionConfig {
  readonly defaults: RetentionPolicy;
  /** NCRONTAB, six fields. */
  readonly schedule: string;
  readonly maxSeconds: number;
  readonly maxDeletes: number;
}

export const DEFAULT_PRUNE_SCHEDULE = '0 0 * * * *';

function retentionFrom(env: Env): RetentionConfig {
  const optionalWhole = (name: SettingName, max: number) =>
    parse(name, positiveInt(max).optional(), read(env, name)) ?? null;
  const dropBranches = readBoolean(env, 'CAIRN_RETENTION_DROP_BRANCHES');
  return {
    defaults: {
      ...KEEP_EVERYTHING,
      threadTtlSeconds: optionalWhole('CAIRN_RETENTION_THREAD_TTL_SECONDS', MAX_TTL_SECONDS),
      keepCheckpoints: optionalWhole('CAIRN_RETENTION_KEEP_CHECKPOINTS', MAX_KEEP_CHECKPOINTS),
      dropBranches,
      sessionTtlSeconds: optionalWhole('CAIRN_RETENTION_SESSION_TTL_SECONDS', MAX_TTL_SECONDS),
      interactionDays: optionalWhole('CAIRN_RETENTION_INTERACTION_DAYS', MAX_INTERACTION_DAYS),
    },
    schedule: pruneScheduleFrom(env),
    maxSeconds: parse(
      'CAIRN_PRUNE_MAX_SECONDS',
      positiveInt(3600).default(120),
      read(env, 'CAIRN_PRUNE_MAX_SECONDS'),
    ),
    maxDeletes: parse(
      'CAIRN_PRUNE_MAX_DELETES',
      positiveInt(10_000_000).default(50_000),
      read(env, 'CAIRN_PRUNE_MAX_DELETES'),
    ),
  };
}

/** Where memory facts live: a table when the table service is configured. */
export interface MemoryConfig {
  readonly tableName: string;
  /** Unset: facts live on the local filesystem (local backend), or nowhere (Blob backend: 501 not_configured). */
  readonly tableService?: StorageServiceConfig;
}

export const DEFAULT_MEMORY_TABLE = 'cairnmemory';

function memoryFrom(env: Env, sessionIndex: SessionIndexConfig): MemoryConfig {
  const tableName = read(env, 'CAIRN_MEMORY_TABLE') ?? DEFAULT_MEMORY_TABLE;
  if (!TABLE_NAME.test(tableName)) {
    throw new ConfigurationError(
      'CAIRN_MEMORY_TABLE',
      'must be 3-63 letters or digits, starting with a letter',
    );
  }
  const { tableService } = sessionIndex;
  return tableService === undefined ? { tableName } : { tableName, tableService };
}

/** The session index (Azure Table Storage). */
export interface SessionIndexConfig {
  readonly tableName: string;
  /** Unset: on the local backend the index is under the data folder; on Blob the session routes answer 501 not_configured naming CAIRN_TABLE_ENDPOINT. */
  readonly tableService?: StorageServiceConfig;
}

export const DEFAULT_SESSION_TABLE = 'cairnsessions';
const TABLE_NAME = /^[A-Za-z][A-Za-z0-9]{2,62}$/;

function sessionIndexFrom(env: Env): SessionIndexConfig {
  const tableName = read(env, 'CAIRN_SESSION_TABLE') ?? DEFAULT_SESSION_TABLE;
  if (!TABLE_NAME.test(tableName)) {
    throw new ConfigurationError(
      'CAIRN_SESSION_TABLE',
      'must be 3-63 letters or digits, starting with a letter',
    );
  }
  const endpoint = read(env, 'CAIRN_TABLE_ENDPOINT');
  if (endpoint === undefined) return { tableName };
  parse('CAIRN_TABLE_ENDPOINT', httpUrl, endpoint);
  return { tableName, tableService: storageServiceFrom(env, endpoint) };
}

type Env = Record<string, string | undefined>;

const CONTAINER_BASE = /^[a-z0-9](?:[a-z0-9]|-(?=[a-z0-9])){2,38}$/;
const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
/** Azure's queue name rule: 3-63 lowercase letters, digits and single hyphens, no hyphen at either end. */
const QUEUE_NAME = /^[a-z0-9](?:[a-z0-9]|-(?=[a-z0-9])){2,62}$/;
export const DEFAULT_EMAIL_POLL_SCHEDULE = '0 */1 * * * *';
export const DEFAULT_EMAIL_WINDOW_QUEUE = 'email-windows';

/**
 * Reads a setting; the empty string (or blanks) counts as unset (a half-set variable is no
 * setting). A Key Vault reference the platform did not resolve (the secret is missing, or the app
 * may not read it) leaves its own text in the setting: that is refused, naming the setting, rather
 * than taken for a value.
 */
function read(env: Env, name: SettingName): string | undefined {
  const value = env[name]?.trim();
  if (value !== undefined && /^@Microsoft\.KeyVault\(/i.test(value)) {
    throw new ConfigurationError(
      name,
      'holds an unresolved Key Vault reference: the secret is missing or the app cannot read it (infra/README.md)',
    );
  }
  return value === undefined || value === '' ? undefined : value;
}

/**
 * The one parser of boolean settings: true/1/yes or false/0/no (any case); unset (or blank) gives
 * `unset`; any other value is refused, naming the setting, rather than read as false.
 */
export function readBoolean(
  env: Record<string, string | undefined>,
  name: SettingName,
  unset = false,
): boolean {
  const value = read(env, name)?.toLowerCase();
  if (value === undefined) return unset;
  if (value === 'true' || value === '1' || value === 'yes') return true;
  if (value === 'false' || value === '0' || value === 'no') return false;
  throw new ConfigurationError(name, 'must be true or false (also 1/0, yes/no)');
}

function parse<T>(name: SettingName, schema: z.ZodType<T>, value: string | undefined): T {
  const result = schema.safeParse(value);
  if (!result.success) {
    throw new ConfigurationError(name, result.error.issues[0]?.message ?? 'invalid value');
  }
  return result.data;
}

const httpUrl = z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' });

export const DEFAULT_HEAP_GROWING_PERCENT = 30;
export const MAX_HEAP_GROWING_PERCENT = 300;

const positiveInt = (max: number) =>
  z.coerce
    .number({ error: 'must be a whole number' })
    .int('must be a whole number')
    .min(1, 'must be at least 1')
    .max(max, `must be at most ${max}`);

export function parseApiKeys(value: string | undefined): ApiKeyEntry[] {
  if (value === undefined) return [];
  const entries = value
    .split(',')
    .map((entry) => entry.trim())
    .filter((entry) => entry !== '')
    .map((entry, index) => {
      const [tenant = '', sha256 = '', role, ...rest] = entry.split(':');
      const where = `entry ${index + 1}`;
      if (!isValidTenantId(tenant)) {
        throw new ConfigurationError('CAIRN_API_KEYS', `${where}: tenant ${TENANT_ID_RULE}`);
      }
      if (!/^[0-9a-fA-F]{64}$/.test(sha256)) {
        throw new ConfigurationError('CAIRN_API_KEYS', `${where}: expected the SHA-256 hex of the key`);
      }
      if ((role !== undefined && role !== 'admin') || rest.length > 0) {
        throw new ConfigurationError('CAIRN_API_KEYS', `${where}: the only role is "admin"`);
      }
      return { tenant, sha256: sha256.toLowerCase(), admin: role === 'admin' };
    });
  // A key is looked up by its hash alone: one hash under two tenants (or with and without admin)
  // would silently give the key to whichever entry came last, e.g. another tenant's data.
  const byHash = new Map<string, ApiKeyEntry>();
  for (const [index, entry] of entries.entries()) {
    const earlier = byHash.get(entry.sha256);
    if (earlier !== undefined && (earlier.tenant !== entry.tenant || earlier.admin !== entry.admin)) {
      throw new ConfigurationError(
        'CAIRN_API_KEYS',
        `entry ${index + 1}: its key hash is already given to tenant ${earlier.tenant}${earlier.admin ? ' as admin' : ''}; one key belongs to one tenant and role`,
      );
    }
    byHash.set(entry.sha256, entry);
  }
  return entries;
}

/** The storage account name in an endpoint: Azurite's path style or Azure's host style. */
function accountNameOf(endpoint: string): string {
  const url = new URL(endpoint);
  const firstPathSegment = url.pathname.split('/').find((segment) => segment !== '');
  return firstPathSegment ?? url.hostname.split('.')[0] ?? '';
}

function backendFrom(env: Env, dataDir: string): BackendConfig {
  if (readBoolean(env, 'CAIRN_KEEP_LOCAL')) {
    return { kind: 'local', dataDir };
  }
  const endpoint = read(env, 'CAIRN_BLOB_ENDPOINT');
  const container = read(env, 'CAIRN_BLOB_CONTAINER');
  if (endpoint === undefined && container === undefined) return { kind: 'local', dataDir };
  if (endpoint === undefined) {
    throw new ConfigurationError('CAIRN_BLOB_ENDPOINT', 'is missing while CAIRN_BLOB_CONTAINER is set');
  }
  if (container === undefined) {
    throw new ConfigurationError('CAIRN_BLOB_CONTAINER', 'is missing while CAIRN_BLOB_ENDPOINT is set');
  }
  parse('CAIRN_BLOB_ENDPOINT', httpUrl, endpoint);
  if (!CONTAINER_BASE.test(container)) {
    throw new ConfigurationError(
      'CAIRN_BLOB_CONTAINER',
      'must be 3-39 lowercase letters, digits or single hyphens, starting and ending with a letter or digit',
    );
  }
  return { kind: 'blob', container, ...storageServiceFrom(env, endpoint) };
}

/**
 * Endpoint, account and credential of a storage service: the account key when one is set (Azurite
 * and development), else the managed identity, whose client id must then be set.
 */
function storageServiceFrom(env: Env, endpoint: string): StorageServiceConfig {
  const accountKey = read(env, 'CAIRN_STORAGE_ACCOUNT_KEY');
  const managedIdentityClientId = read(env, 'AZURE_CLIENT_ID');
  if (accountKey === undefined && managedIdentityClientId === undefined) {
    throw new ConfigurationError(
      'AZURE_CLIENT_ID',
      'is missing: set it to the managed identity client id (or CAIRN_STORAGE_ACCOUNT_KEY for Azurite)',
    );
  }
  return {
    endpoint: endpoint.replace(/\/+$/, ''),
    accountName: accountNameOf(endpoint),
    ...(accountKey === undefined ? {} : { accountKey }),
    ...(managedIdentityClientId === undefined ? {} : { managedIdentityClientId }),
  };
}

/**
 * The emailWindowPoll schedule. Exported because the timer registration needs it at load time: the
 * schedule is passed as a value, not as `%CAIRN_EMAIL_POLL_SCHEDULE%`, so that the default applies
 * on the Functions host too (the host has no defaults for `%SETTING%` references).
 */
export function emailPollScheduleFrom(env: Env = process.env): string {
  return scheduleFrom(env, 'CAIRN_EMAIL_POLL_SCHEDULE', DEFAULT_EMAIL_POLL_SCHEDULE, '0 */1 * * * *');
}

/** The retentionPrune schedule, read at registration time as {@link emailPollScheduleFrom} is. */
export function pruneScheduleFrom(env: Env = process.env): string {
  return scheduleFrom(env, 'CAIRN_PRUNE_SCHEDULE', DEFAULT_PRUNE_SCHEDULE, DEFAULT_PRUNE_SCHEDULE);
}

function scheduleFrom(env: Env, name: SettingName, fallback: string, example: string): string {
  const schedule = (read(env, name) ?? fallback).replace(/\s+/g, ' ');
  if (schedule.split(' ').length !== 6) {
    throw new ConfigurationError(
      name,
      `must be an NCRONTAB expression of six fields, seconds first (e.g. "${example}")`,
    );
  }
  try {
    new Cron(schedule, { paused: true }).stop();
  } catch (error) {
    throw new ConfigurationError(
      name,
      `is not a valid NCRONTAB expression: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
  return schedule;
}

export const DEFAULT_AUDIT_SIGN_SCHEDULE = '0 */5 * * * *';

/** The auditHeadSign schedule, passed as a value at registration like the email poll's. */
export function auditSignScheduleFrom(env: Env = process.env): string {
  return scheduleFrom(
    env,
    'CAIRN_AUDIT_SIGN_SCHEDULE',
    DEFAULT_AUDIT_SIGN_SCHEDULE,
    DEFAULT_AUDIT_SIGN_SCHEDULE,
  );
}

function encryptionFrom(env: Env): EncryptionConfig {
  const keys = parseEncryptionKeys(read(env, 'CAIRN_ENCRYPTION_KEYS'));
  const tenants = read(env, 'CAIRN_ENCRYPT_TENANTS');
  if (tenants === undefined) return { keys, tenantPolicy: new Set() };
  if (keys.length === 0) {
    throw new ConfigurationError(
      'CAIRN_ENCRYPT_TENANTS',
      'lists tenants, but CAIRN_ENCRYPTION_KEYS is empty',
    );
  }
  if (tenants === '*') return { keys, tenantPolicy: '*' };
  const listed = tenants
    .split(',')
    .map((tenant) => tenant.trim())
    .filter((tenant) => tenant !== '');
  for (const [index, tenant] of listed.entries()) {
    if (!isValidTenantId(tenant)) {
      throw new ConfigurationError(
        'CAIRN_ENCRYPT_TENANTS',
        `entry ${index + 1}: must be * or tenant ids (1-64 of [A-Za-z0-9._-])`,
      );
    }
  }
  return { keys, tenantPolicy: new Set(listed) };
}

export const DEFAULT_AUDIT_TABLE = 'cairnaudit';

function auditFrom(env: Env, sessionIndex: SessionIndexConfig, backend: BackendConfig): AuditConfig {
  const enabled = readBoolean(env, 'CAIRN_AUDIT');
  const tableName = read(env, 'CAIRN_AUDIT_TABLE') ?? DEFAULT_AUDIT_TABLE;
  if (!TABLE_NAME.test(tableName)) {
    throw new ConfigurationError(
      'CAIRN_AUDIT_TABLE',
      'must be 3-63 letters or digits, starting with a letter',
    );
  }
  const keyText = read(env, 'CAIRN_AUDIT_SIGNING_KEY');
  let signingKey: KeyObject | undefined;
  if (keyText !== undefined) {
    try {
      signingKey = parsePrivateKey(keyText);
    } catch (error) {
      throw new ConfigurationError('CAIRN_AUDIT_SIGNING_KEY', (error as Error).message);
    }
  }
  const signSchedule = auditSignScheduleFrom(env);
  if (enabled && sessionIndex.tableService === undefined && backend.kind === 'blob') {
    throw new ConfigurationError(
      'CAIRN_TABLE_ENDPOINT',
      'is missing while CAIRN_AUDIT is true: with the Blob backend the audit trail lives in Table Storage',
    );
  }
  return {
    enabled,
    tableName,
    ...(enabled && sessionIndex.tableService !== undefined
      ? { tableService: sessionIndex.tableService }
      : {}),
    ...(signingKey === undefined ? {} : { signingKey }),
    signSchedule,
  };
}

function emailPollFrom(env: Env): EmailPollConfig {
  const schedule = emailPollScheduleFrom(env);
  const queueName = read(env, 'CAIRN_EMAIL_WINDOW_QUEUE') ?? DEFAULT_EMAIL_WINDOW_QUEUE;
  if (!QUEUE_NAME.test(queueName)) {
    throw new ConfigurationError(
      'CAIRN_EMAIL_WINDOW_QUEUE',
      'must be 3-63 lowercase letters, digits or single hyphens, starting and ending with a letter or digit',
    );
  }
  const queueEndpoint = read(env, 'CAIRN_QUEUE_ENDPOINT');
  if (queueEndpoint === undefined) return { schedule, queueName };
  parse('CAIRN_QUEUE_ENDPOINT', httpUrl, queueEndpoint);
  return { schedule, queueName, queueService: storageServiceFrom(env, queueEndpoint) };
}

function entraFrom(env: Env): EntraConfig | undefined {
  const issuer = read(env, 'CAIRN_AUTH_ISSUER');
  const audience = read(env, 'CAIRN_AUTH_AUDIENCE');
  const jwksUri = read(env, 'CAIRN_AUTH_JWKS_URI');
  const set = [issuer, audience, jwksUri].filter((value) => value !== undefined).length;
  if (set === 0) return undefined;
  if (issuer === undefined) throw new ConfigurationError('CAIRN_AUTH_ISSUER', 'is missing');
  if (audience === undefined) throw new ConfigurationError('CAIRN_AUTH_AUDIENCE', 'is missing');
  if (jwksUri === undefined) throw new ConfigurationError('CAIRN_AUTH_JWKS_URI', 'is missing');
  parse('CAIRN_AUTH_JWKS_URI', httpUrl, jwksUri);
  return { issuer, audience, jwksUri, tenantClaim: read(env, 'CAIRN_AUTH_TENANT_CLAIM') ?? 'oid' };
}

/** Reads and validates every setting. Throws {@link ConfigurationError} naming the first bad one. */
function parseSourceRoots(value: string | undefined): string[] {
  const roots = (value ?? '')
    .split(',')
    .map((root) => root.trim())
    .filter((root) => root !== '');
  for (const root of roots) {
    if (!path.isAbsolute(root)) {
      throw new ConfigurationError('CAIRN_MIGRATION_SOURCE_ROOTS', `${root} is not an absolute path`);
    }
  }
  return roots.map((root) => path.resolve(root));
}

export function loadConfig(env: Env = process.env, cwd: string = process.cwd()): Config {
  const dataDir = path.resolve(cwd, read(env, 'CAIRN_DATA_DIR') ?? path.join('.cairn', 'data'));
  const backend = backendFrom(env, dataDir);
  const migrationSourceRoots = parseSourceRoots(read(env, 'CAIRN_MIGRATION_SOURCE_ROOTS'));
  const apiKeys = parseApiKeys(read(env, 'CAIRN_API_KEYS'));
  const entra = entraFrom(env);
  if (apiKeys.length === 0 && entra === undefined) {
    throw new ConfigurationError(
      'CAIRN_API_KEYS',
      'no credential is configured: set CAIRN_API_KEYS or the CAIRN_AUTH_* settings (npm start creates a development key)',
    );
  }
  const maxValueBytes = parse(
    'CAIRN_MAX_VALUE_BYTES',
    positiveInt(64 * 1024 * 1024).default(2_097_152),
    read(env, 'CAIRN_MAX_VALUE_BYTES'),
  );
  const storageTimeoutMs = parse(
    'CAIRN_STORAGE_TIMEOUT_MS',
    positiveInt(120_000).default(8_000),
    read(env, 'CAIRN_STORAGE_TIMEOUT_MS'),
  );
  const heapGrowingPercent = parse(
    'CAIRN_HEAP_GROWING_PERCENT',
    z.coerce
      .number({ error: 'must be a whole number' })
      .int('must be a whole number')
      .min(0, 'must be at least 0')
      .max(MAX_HEAP_GROWING_PERCENT, `must be at most ${MAX_HEAP_GROWING_PERCENT}`)
      .default(DEFAULT_HEAP_GROWING_PERCENT),
    read(env, 'CAIRN_HEAP_GROWING_PERCENT'),
  );
  const logLevel = parse(
    'CAIRN_LOG_LEVEL',
    z.enum(LOG_LEVELS, { error: `must be one of ${LOG_LEVELS.join(', ')}` }).default('info'),
    read(env, 'CAIRN_LOG_LEVEL'),
  );
  const emailPoll = emailPollFrom(env);
  const sessionIndex = sessionIndexFrom(env);
  const snapshotKeys = parseSnapshotKeys(read(env, 'CAIRN_SNAPSHOT_KEYS'));
  const memory = memoryFrom(env, sessionIndex);
  const encryption = encryptionFrom(env);
  const audit = auditFrom(env, sessionIndex, backend);
  const retention = retentionFrom(env);
  return {
    backend,
    dataDir,
    migrationSourceRoots,
    apiKeys,
    ...(entra === undefined ? {} : { entra }),
    maxValueBytes,
    storageTimeoutMs,
    heapGrowingPercent,
    logLevel,
    emailPoll,
    sessionIndex,
    snapshotKeys,
    memory,
    encryption,
    audit,
    retention,
  };
}

/**
 * CAIRN_SNAPSHOT_KEYS: `<tenant>:<base64 raw Ed25519 public key>` entries, comma-separated; a
 * tenant may have several. Keys are stored in their canonical base64 (standard alphabet, padded).
 */
export function parseSnapshotKeys(value: string | undefined): ReadonlyMap<string, readonly string[]> {
  const keys = new Map<string, string[]>();
  if (value === undefined) return keys;
  const entries = value
    .split(',')
    .map((entry) => entry.trim())
    .filter((entry) => entry !== '');
  for (const [index, entry] of entries.entries()) {
    const where = `entry ${index + 1}`;
    const [tenant = '', key = '', ...rest] = entry.split(':');
    if (!isValidTenantId(tenant)) {
      throw new ConfigurationError('CAIRN_SNAPSHOT_KEYS', `${where}: tenant ${TENANT_ID_RULE}`);
    }
    const publicKey = rest.length === 0 ? publicKeyFromBase64(key) : null;
    if (publicKey === null) {
      throw new ConfigurationError(
        'CAIRN_SNAPSHOT_KEYS',
        `${where}: expected <tenant>:<base64 of a 32-byte raw Ed25519 public key> (cairn keygen prints one)`,
      );
    }
    const list = keys.get(tenant) ?? [];
    const canonical = publicKeyToBase64(publicKey);
    if (!list.includes(canonical)) list.push(canonical);
    keys.set(tenant, list);
  }
  return keys;
}
