import type { SealingCodec } from '../crypto/encryption';
import { SealedObjectStore } from '../crypto/sealedObjectStore';
import { sealsTenant, type TenantPolicy } from '../crypto/tenantPolicy';
import type { ValuePlace } from '../crypto/valueCodec';
import { lru } from '../lru';
import { IntegrityError, PreconditionFailedError } from '../protocol/errors';
import { checkObject, type ImmutableObjectStore } from '../storage/immutableObjectStore';
import type { KeyValueStore, KeyValueStoreFactory, ListPage } from '../storage/keyValueStore';
import type { SessionIndex, SessionPage, SessionRecord } from '../storage/sessionIndex';
import { SYSTEM_NAMESPACE } from '../tenants/systemNamespace';

/**
 * Session archives sealed at rest, for the tenants whose policy asks for it (`CAIRN_ENCRYPT_TENANTS`,
 * with `CAIRN_ENCRYPTION_KEYS` set; docs/encryption.md):
 * - every object (blocks, tails, manifests) is sealed by a {@link SealedObjectStore}, kind
 *   {@link ARCHIVE_OBJECT_KIND}, bound to its store key `<sid>/...`; `latest` stays plain (an id);
 * - the `data` of the tenant's session index records is sealed too (the manifest's `data` is in a
 *   sealed manifest already): stored as `{"sealed": "<base64 of the sealed JSON>"}`, kind
 *   {@link ARCHIVE_DATA_KIND}, bound to the session id and the record's checkpoint id (so an older
 *   record's data cannot be put back under a newer checkpoint);
 * - each session of a sealed tenant is recorded, before its first object is written, in the system
 *   namespace (`sealed-sessions/<tenant>/<sid>`, create-only), so that the `rewrap` job reaches
 *   every session, also one whose first checkpoint is not published yet (not in the index).
 */

export const ARCHIVE_OBJECT_KIND = 'archive.object';
export const ARCHIVE_DATA_KIND = 'archive.data';
const SESSIONS_PREFIX = 'sealed-sessions/';

/** The archive's storage as each tenant sees it. */
export interface ArchiveStorage {
  /** The objects of `tenant`'s sessions (sealed when its policy asks for it). */
  readonly objectsOf: (tenant: string) => ImmutableObjectStore;
  readonly index: SessionIndex;
  /**
   * The record of `index` with its `data` opened; IntegrityError when that data does not open.
   * Absent when nothing is sealed. Retention and verify read the index as stored (ids and times
   * only, so a record whose sealed data does not open is no obstacle to them): verify opens each
   * record with this, to report one that does not open instead of passing over the damage.
   */
  readonly openIndexData?: (tenant: string, record: SessionRecord) => Promise<SessionRecord>;
}

/** The same objects for every tenant: nothing sealed. */
export function plainArchiveStorage(objects: ImmutableObjectStore, index: SessionIndex): ArchiveStorage {
  return { objectsOf: () => objects, index };
}

export interface SealedArchiveOptions {
  /** The objects of tenants not sealed. */
  readonly plain: ImmutableObjectStore;
  /** The same objects, taking objects {@link SEAL_OVERHEAD} bytes over the limit. */
  readonly roomy: ImmutableObjectStore;
  readonly index: SessionIndex;
  readonly codec: SealingCodec;
  readonly policy: TenantPolicy;
  /** The registry of sealed tenants' sessions. */
  readonly sessions: SealedSessions;
}

/** The archive's storage with the sealed tenants' objects and index data sealed. */
export function sealedArchiveStorage(options: SealedArchiveOptions): ArchiveStorage {
  const { plain, roomy, codec, policy, sessions } = options;
  if (!codec.encrypts) return plainArchiveStorage(plain, options.index);
  const index = new SealedSessionIndex(options.index, codec, policy);
  return {
    objectsOf: (tenant) =>
      sealsTenant(policy, tenant) ? new SealedArchiveObjects(roomy, tenant, codec, sessions) : plain,
    index,
    openIndexData: (tenant, record) => index.opened(tenant, record),
  };
}

/** A sealed tenant's archive objects: each session recorded before its first write. */
class SealedArchiveObjects extends SealedObjectStore {
  constructor(
    raw: ImmutableObjectStore,
    private readonly owner: string,
    codec: SealingCodec,
    private readonly sessions: SealedSessions,
  ) {
    super(raw, owner, codec, ARCHIVE_OBJECT_KIND);
  }

  override async put(key: string, bytes: Buffer) {
    checkObject(key, bytes);
    const slash = key.indexOf('/');
    if (slash > 0) await this.sessions.register(this.owner, key.slice(0, slash));
    return super.put(key, bytes);
  }
}

/** The sessions of sealed tenants, in the system namespace: the `rewrap` job's list. */
export class SealedSessions {
  /** Sessions this process recorded: each is written once per process at most. */
  private readonly known = lru<string, true>(10_000);
  private readonly system: KeyValueStore;

  /** `kvStores`: the key/value backend as stored; its system namespace holds the registry. */
  constructor(kvStores: KeyValueStoreFactory) {
    this.system = kvStores.forTenant(SYSTEM_NAMESPACE);
  }

  async register(tenant: string, sessionId: string): Promise<void> {
    const key = `${SESSIONS_PREFIX}${tenant}/${sessionId}`;
    if (this.known.get(key) !== undefined) return;
    try {
      await this.system.write(key, Buffer.from('{}'), { ifAbsent: true });
    } catch (error) {
      if (!(error instanceof PreconditionFailedError)) throw error;
    }
    this.known.set(key, true);
  }

  /** One page of the tenant's sealed sessions, ascending; `cursor` from the previous page. */
  async page(
    tenant: string,
    limit: number,
    cursor: string | null,
  ): Promise<{ ids: string[]; cursor: string | null }> {
    const prefix = `${SESSIONS_PREFIX}${tenant}/`;
    const page: ListPage = await this.system.list({ prefix, limit, ...(cursor === null ? {} : { cursor }) });
    return { ids: page.keys.map((key) => key.slice(prefix.length)), cursor: page.cursor };
  }
}

/** The stored form of a sealed tenant's index `data`. */
interface SealedData {
  readonly sealed: string;
}

export function indexDataPlace(tenant: string, record: SessionRecord): ValuePlace {
  return { tenant, kind: ARCHIVE_DATA_KIND, key: record.id, version: record.checkpointId };
}

/** The sealed bytes of a sealed tenant's stored index `data`; IntegrityError when not in that form. */
export function sealedDataOf(record: SessionRecord): Buffer {
  const data = record.data as Partial<SealedData> | null;
  if (data === null || typeof data.sealed !== 'string' || Object.keys(data).length !== 1) {
    throw new IntegrityError(
      `the session index record of ${record.id} is not sealed, but this tenant's archives are`,
    );
  }
  return Buffer.from(data.sealed, 'base64');
}

export function withSealedData(record: SessionRecord, sealed: Buffer): SessionRecord {
  return { ...record, data: { sealed: sealed.toString('base64') } satisfies SealedData };
}

/** The session index with the `data` of sealed tenants' records sealed (null stays null). */
class SealedSessionIndex implements SessionIndex {
  constructor(
    private readonly inner: SessionIndex,
    private readonly codec: SealingCodec,
    private readonly policy: TenantPolicy,
  ) {}

  ownerOf(sessionId: string): Promise<string | null> {
    return this.inner.ownerOf(sessionId);
  }

  claim(sessionId: string, tenant: string): Promise<string> {
    return this.inner.claim(sessionId, tenant);
  }

  async get(tenant: string, sessionId: string): Promise<SessionRecord | null> {
    const record = await this.inner.get(tenant, sessionId);
    return record === null ? null : this.opened(tenant, record);
  }

  async list(tenant: string, options: { after?: string; limit: number }): Promise<SessionPage> {
    const page = await this.inner.list(tenant, options);
    const sessions = await Promise.all(page.sessions.map((record) => this.opened(tenant, record)));
    return { ...page, sessions };
  }

  update(
    tenant: string,
    sessionId: string,
    decide: (current: SessionRecord | null) => Promise<SessionRecord | null>,
  ): Promise<void> {
    if (!sealsTenant(this.policy, tenant)) return this.inner.update(tenant, sessionId, decide);
    return this.inner.update(tenant, sessionId, async (current) => {
      const next = await decide(current === null ? null : await this.openedOrBare(tenant, current));
      if (next === null || next.data === null) return next;
      await this.codec.prepareOwnBytes(tenant);
      const plain = Buffer.from(JSON.stringify(next.data), 'utf8');
      return withSealedData(next, this.codec.seal(plain, indexDataPlace(tenant, next)));
    });
  }

  remove(tenant: string, sessionId: string): Promise<boolean> {
    return this.inner.remove(tenant, sessionId);
  }

  /**
   * For an update: `record` with its `data` opened, or with `data` null when it does not open (a
   * damaged record). An update is a publish's: it decides by the checkpoint id alone and writes the
   * record of the newer checkpoint, whose data replaces the damaged one. Refused, the damage would
   * stay for good, and with it the integrity error of the session's read and of every listing page
   * that holds it; verify reports the damage until then.
   */
  private async openedOrBare(tenant: string, record: SessionRecord): Promise<SessionRecord> {
    try {
      return await this.opened(tenant, record);
    } catch (error) {
      if (!(error instanceof IntegrityError)) throw error;
      return { ...record, data: null };
    }
  }

  /** `record` as stored, its `data` opened (IntegrityError when it does not open). */
  async opened(tenant: string, record: SessionRecord): Promise<SessionRecord> {
    if (!sealsTenant(this.policy, tenant) || record.data === null) return record;
    await this.codec.prepareOwnBytes(tenant);
    const plain = this.codec.open(sealedDataOf(record), indexDataPlace(tenant, record));
    return { ...record, data: JSON.parse(plain.toString('utf8')) as Record<string, unknown> };
  }
}
