import {
  CairnError,
  ConfigurationError,
  IntegrityError,
  InternalError,
  PreconditionFailedError,
} from '../protocol/errors';
import type { KeyValueStore, KeyValueStoreFactory } from '../storage/keyValueStore';
import { TenantRegistry } from '../tenants/tenantRegistry';
import type { EncryptionKey } from './encryptionKeys';
import { hasSealMarker, openWith, sealedKeyId, sealWith } from './sealedFormat';
import { sealsTenant, type TenantPolicy } from './tenantPolicy';
import type { ValueCodec, ValuePlace } from './valueCodec';

/**
 * Encryption at rest, once per process: the codec every store seals its values with, the key-check
 * record that keeps the app from running on keys its data was not written with, and the registry
 * of tenants that stored sealed values (the `rewrap` job's list).
 *
 * The key-check record (`encryption/key-check` in the system namespace, `@cairn`, which no tenant
 * can reach) lists every key id data may have been sealed with (`sealedWith`: each id that was ever
 * the first key) and holds a short value sealed with each key that was ever configured. The check
 * ({@link Encryption.check}) runs at start-up and before any value is sealed or opened, and refuses
 * (a {@link ConfigurationError} naming CAIRN_ENCRYPTION_KEYS) when:
 * - the record exists and no key is configured (data was written with keys);
 * - a configured key's id is in the record but the key does not open its check value (the id
 *   names other key material than the data was sealed with);
 * - none of the configured keys is in the record (no key the data was written with).
 * A configured key the record does not know is added to it (a new first key, on first use).
 * Without keys and without a record, nothing was ever sealed: the check passes and writes nothing.
 *
 * With keys, the check also refuses (naming CAIRN_ENCRYPT_TENANTS) a policy that no longer lists a
 * tenant whose own-format bytes (key/value values, session archives) were sealed: those stores
 * would hand the sealed bytes out as they are. Such tenants are recorded (`sealed-own-tenants/`,
 * create-only) before their first sealed value of that kind ({@link SealingCodec.prepareOwnBytes}).
 */

export const KEY_CHECK_KEY = 'encryption/key-check';
const SEALED_TENANTS_PREFIX = 'sealed-tenants/';
const SEALED_OWN_TENANTS_PREFIX = 'sealed-own-tenants/';
const POLICY_SETTING = 'CAIRN_ENCRYPT_TENANTS';
const CHECK_PLAINTEXT = Buffer.from('cairn key check v1');
const SETTING = 'CAIRN_ENCRYPTION_KEYS';
const CHECK_ATTEMPTS = 5;

interface KeyCheckRecord {
  readonly v: 1;
  /** Key id → base64 of the check value sealed with that key. */
  readonly keys: Record<string, string>;
  /** Ids that were the first key (so may have sealed data), in the order they became first. */
  readonly sealedWith: string[];
  readonly updatedAt: string;
}

const checkPlace = (id: string): ValuePlace => ({ tenant: '@cairn', kind: 'key-check', key: id });

/** The codec of a process, with what the rewrap job needs to know about sealed bytes. */
export interface SealingCodec extends ValueCodec {
  prepare(tenant: string): Promise<void>;
  /**
   * {@link prepare}, and the tenant recorded as one whose own-format bytes (key/value values,
   * session archives) are sealed: call it before sealing such bytes.
   */
  prepareOwnBytes(tenant: string): Promise<void>;
  /** The id of the key that seals new values; undefined when encryption is off. */
  readonly firstKeyId: string | undefined;
  /** Every configured key id, the first one first. */
  readonly keyIds: readonly string[];
  /** The key id `stored` was sealed with; null when the bytes are not in the sealed format. */
  keyIdOf(stored: Buffer): string | null;
}

export interface EncryptionOptions {
  readonly keys: readonly EncryptionKey[];
  /** The key/value backend: the system namespace holds the key-check record and the registry. */
  readonly kvStores: KeyValueStoreFactory;
  /** The tenants whose own-format bytes are sealed (CAIRN_ENCRYPT_TENANTS); default none. */
  readonly policy?: TenantPolicy;
}

export class Encryption {
  readonly codec: SealingCodec;
  private readonly system: KeyValueStore;
  private readonly registry: TenantRegistry;
  private readonly ownRegistry: TenantRegistry;
  private readonly byId: ReadonlyMap<string, EncryptionKey>;
  private checked: Promise<void> | undefined;
  private passed = false;
  /** Tenants recorded in the registry by this process (or being recorded). */
  private readonly registered = new Map<string, Promise<void>>();
  /** Tenants recorded in the registry of sealed own-format bytes by this process. */
  private readonly ownRegistered = new Map<string, Promise<void>>();

  constructor(private readonly options: EncryptionOptions) {
    this.system = options.kvStores.forTenant('@cairn');
    this.registry = new TenantRegistry(options.kvStores, SEALED_TENANTS_PREFIX);
    this.ownRegistry = new TenantRegistry(options.kvStores, SEALED_OWN_TENANTS_PREFIX);
    this.byId = new Map(options.keys.map((key) => [key.id, key]));
    this.codec = this.makeCodec();
  }

  /** True when keys are configured: values are sealed. */
  get enabled(): boolean {
    return this.options.keys.length > 0;
  }

  /**
   * The key check (see the module comment), run once per process: a refusal is kept (the
   * configuration must change, which means a restart), a storage fault is not (the next call
   * tries again).
   */
  check(): Promise<void> {
    this.checked ??= this.runCheck().then(
      () => {
        this.passed = true;
      },
      (error: unknown) => {
        if (!(error instanceof ConfigurationError)) this.checked = undefined;
        throw error;
      },
    );
    return this.checked;
  }

  /** The check, then (keys configured) the tenant's registration; remembered per process. */
  async prepare(tenant: string): Promise<void> {
    try {
      await this.check();
    } catch (error) {
      if (error instanceof CairnError) throw error;
      // A refusal found after start-up (the host served anyway): fail closed, say why.
      throw new InternalError(
        `encryption at rest cannot be used: ${error instanceof Error ? error.message : String(error)}`,
        {},
        { cause: error },
      );
    }
    if (!this.enabled) return;
    await registerOnce(this.registered, this.registry, tenant);
  }

  /** {@link prepare}, then (keys configured) the tenant recorded as sealing its own-format bytes. */
  async prepareOwnBytes(tenant: string): Promise<void> {
    await this.prepare(tenant);
    if (this.enabled) await registerOnce(this.ownRegistered, this.ownRegistry, tenant);
  }

  /** Every tenant that stored sealed values (registered before its first sealed write). */
  sealedTenants(pageSize?: number): AsyncGenerator<string> {
    return this.registry.tenants(pageSize);
  }

  private async runCheck(): Promise<void> {
    await this.checkKeys();
    if (this.enabled) await this.checkPolicy();
  }

  /** Every tenant whose own-format bytes were sealed is still in the policy. */
  private async checkPolicy(): Promise<void> {
    const policy = this.options.policy ?? new Set<string>();
    for await (const tenant of this.ownRegistry.tenants()) {
      if (!sealsTenant(policy, tenant)) {
        throw new ConfigurationError(
          POLICY_SETTING,
          `does not list tenant ${tenant}, whose key/value values or session archives are sealed; list it again (sealing cannot be turned off for a tenant)`,
        );
      }
    }
  }

  private async checkKeys(): Promise<void> {
    const keys = this.options.keys;
    for (let attempt = 0; attempt < CHECK_ATTEMPTS; attempt++) {
      const stored = await this.system.read(KEY_CHECK_KEY);
      if (stored === null) {
        if (keys.length === 0) return;
        const record = this.withKeys({ v: 1, keys: {}, sealedWith: [], updatedAt: '' });
        if (await this.write(record, { ifAbsent: true })) return;
        continue;
      }
      const record = parseRecord(stored.value);
      const known = Object.keys(record.keys);
      if (keys.length === 0) {
        throw new ConfigurationError(
          SETTING,
          `is empty, but data was written with encryption keys (ids ${record.sealedWith.join(', ')}); configure them`,
        );
      }
      let matched = 0;
      for (const key of keys) {
        const value = record.keys[key.id];
        if (value === undefined) continue;
        try {
          if (!openWith(key, Buffer.from(value, 'base64'), checkPlace(key.id)).equals(CHECK_PLAINTEXT)) {
            throw new IntegrityError('the check value differs');
          }
        } catch {
          throw new ConfigurationError(
            SETTING,
            `key ${key.id} is not the key data was written with under that id`,
          );
        }
        matched++;
      }
      if (matched === 0) {
        throw new ConfigurationError(
          SETTING,
          `none of the configured keys (ids ${keys.map((key) => key.id).join(', ')}) is a key data was written with (ids ${known.join(', ')})`,
        );
      }
      const first = keys[0] as EncryptionKey;
      if (keys.every((key) => known.includes(key.id)) && record.sealedWith.includes(first.id)) return;
      if (await this.write(this.withKeys(record), { ifMatch: stored.etag })) return;
    }
    throw new InternalError('the key-check record keeps changing; retry');
  }

  /** `record` with a check value for every configured key it lacks, and the first key in `sealedWith`. */
  private withKeys(record: KeyCheckRecord): KeyCheckRecord {
    const keys = { ...record.keys };
    for (const key of this.options.keys) {
      keys[key.id] ??= sealWith(key, CHECK_PLAINTEXT, checkPlace(key.id)).toString('base64');
    }
    const first = this.options.keys[0]?.id;
    const sealedWith =
      first === undefined || record.sealedWith.includes(first)
        ? record.sealedWith
        : [...record.sealedWith, first];
    return { v: 1, keys, sealedWith, updatedAt: new Date().toISOString() };
  }

  /** False when the record changed meanwhile (the check starts again). */
  private async write(record: KeyCheckRecord, conditions: { ifAbsent?: true; ifMatch?: string }) {
    try {
      await this.system.write(KEY_CHECK_KEY, Buffer.from(JSON.stringify(record)), conditions);
      return true;
    } catch (error) {
      if (error instanceof PreconditionFailedError) return false;
      throw error;
    }
  }

  private makeCodec(): SealingCodec {
    const keys = this.options.keys;
    const first = keys[0];
    const ready = () => {
      if (!this.passed) {
        throw new InternalError(
          'the encryption key check has not passed yet (CAIRN_ENCRYPTION_KEYS); nothing is sealed or opened before it',
        );
      }
    };
    return {
      encrypts: first !== undefined,
      firstKeyId: first?.id,
      keyIds: keys.map((key) => key.id),
      prepare: (tenant) => this.prepare(tenant),
      prepareOwnBytes: (tenant) => this.prepareOwnBytes(tenant),
      keyIdOf: sealedKeyId,
      seal: (plain, place) => {
        ready();
        return first === undefined ? plain : sealWith(first, plain, place);
      },
      open: (stored, place) => {
        ready();
        const id = sealedKeyId(stored);
        if (first === undefined) {
          if (id !== null && hasSealMarker(stored)) {
            throw new IntegrityError(
              `the stored ${place.kind} value at ${place.key} is sealed, but no encryption key is configured`,
            );
          }
          return stored;
        }
        if (id === null) {
          throw new IntegrityError(
            `the stored ${place.kind} value at ${place.key} is not sealed, but encryption keys are configured`,
          );
        }
        const key = this.byId.get(id);
        if (key === undefined) {
          throw new IntegrityError(
            `the stored ${place.kind} value at ${place.key} was sealed with key ${id}, which ${SETTING} does not list`,
          );
        }
        return openWith(key, stored, place);
      },
    };
  }
}

/** Registers `tenant` once per process (a failure is not remembered: the next call tries again). */
async function registerOnce(
  done: Map<string, Promise<void>>,
  registry: TenantRegistry,
  tenant: string,
): Promise<void> {
  let registered = done.get(tenant);
  if (registered === undefined) {
    registered = registry.register(tenant).catch((error: unknown) => {
      done.delete(tenant);
      throw error;
    });
    done.set(tenant, registered);
  }
  await registered;
}

function parseRecord(bytes: Buffer): KeyCheckRecord {
  try {
    const record = JSON.parse(bytes.toString('utf8')) as KeyCheckRecord;
    if (record.v === 1 && typeof record.keys === 'object' && Array.isArray(record.sealedWith)) return record;
  } catch {
    // Reported below.
  }
  throw new ConfigurationError(
    SETTING,
    `the key-check record (${KEY_CHECK_KEY} in the system namespace) is not readable: the app cannot tell which keys its data was written with`,
  );
}
