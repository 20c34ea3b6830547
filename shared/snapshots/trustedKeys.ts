import type { KeyObject } from 'node:crypto';

import { lru } from '../lru';
import { InternalError, InvalidArgumentError } from '../protocol/errors';
import { MAX_KEYS_BODY_BYTES, MAX_RUNTIME_KEYS } from '../protocol/snapshots';
import { publicKeyFromBase64, publicKeyToBase64 } from '../protocol/snapshots/signatures';
import { checkTenantId } from '../protocol/tenants/tenantIds';
import type { KeyValueStore, KeyValueStoreFactory } from '../storage/keyValueStore';
import { SYSTEM_NAMESPACE } from '../tenants/systemNamespace';

/**
 * The public keys a tenant's snapshots must be signed with: those of CAIRN_SNAPSHOT_KEYS plus those
 * an admin set at run time. No key at all: the service accepts any signature (the loader still
 * checks it against the public key it is given).
 *
 * Run-time keys live in the key/value store's system namespace (a name no tenant id can take, so no
 * caller reaches it through the key/value API), one value per tenant, `snapshot-keys/<tenant>`:
 * `{"keys": ["<base64>", ...], "updatedAt": "…"}`. They are read on every publish, so a change
 * holds on every instance at once. Setting them replaces the tenant's run-time list; the keys of the
 * setting stay whatever the run-time list says (change the setting to drop one).
 */
export interface TenantKeys {
  /** From CAIRN_SNAPSHOT_KEYS. */
  readonly configured: readonly string[];
  /** Set at run time by an admin. */
  readonly runtime: readonly string[];
}

// How many run-time keys a tenant may have, and the largest body that sets them: the protocol's.
export { MAX_KEYS_BODY_BYTES, MAX_RUNTIME_KEYS };
const PREFIX = 'snapshot-keys/';

export class TrustedSnapshotKeys {
  private readonly store: KeyValueStore;
  /** Parsed keys by their base64 (parsing costs more than a read). */
  private readonly parsed = lru<string, KeyObject>(1024);

  constructor(
    private readonly configured: ReadonlyMap<string, readonly string[]>,
    kvStores: KeyValueStoreFactory,
  ) {
    this.store = kvStores.forTenant(SYSTEM_NAMESPACE);
  }

  /** The keys a signature of `tenant` must verify with (empty: any signature is accepted). */
  async keysOf(tenant: string): Promise<KeyObject[]> {
    const { configured, runtime } = await this.describe(tenant);
    return [...new Set([...configured, ...runtime])].map((text) => this.keyObject(text));
  }

  async describe(tenant: string): Promise<TenantKeys> {
    checkTenantId(tenant);
    const stored = await this.store.read(PREFIX + tenant);
    let runtime: string[] = [];
    if (stored !== null) {
      try {
        runtime = (JSON.parse(stored.value.toString('utf8')) as { keys: string[] }).keys;
      } catch (error) {
        throw new InternalError(
          `the trusted snapshot keys of ${tenant} are not readable`,
          {},
          { cause: error },
        );
      }
    }
    return { configured: this.configured.get(tenant) ?? [], runtime };
  }

  /** Replaces the run-time keys of `tenant` (base64 of raw Ed25519 public keys; `keys.N` names a bad one). */
  async setRuntime(tenant: string, keys: readonly string[]): Promise<TenantKeys> {
    checkTenantId(tenant);
    if (keys.length > MAX_RUNTIME_KEYS) {
      throw new InvalidArgumentError('keys', `must hold at most ${MAX_RUNTIME_KEYS} keys`);
    }
    const canonical = keys.map((text, index) => {
      const key = publicKeyFromBase64(text);
      if (key === null) {
        throw new InvalidArgumentError(
          `keys.${index}`,
          'must be the base64 of a 32-byte raw Ed25519 public key',
        );
      }
      return publicKeyToBase64(key);
    });
    const unique = [...new Set(canonical)];
    const record = JSON.stringify({ keys: unique, updatedAt: new Date().toISOString() });
    await this.store.write(PREFIX + tenant, Buffer.from(record, 'utf8'));
    return { configured: this.configured.get(tenant) ?? [], runtime: unique };
  }

  /** Removes the run-time keys of `tenant`; the configured ones stay. */
  async clearRuntime(tenant: string): Promise<void> {
    checkTenantId(tenant);
    await this.store.delete(PREFIX + tenant);
  }

  private keyObject(text: string): KeyObject {
    let key = this.parsed.get(text);
    if (key === undefined) {
      const made = publicKeyFromBase64(text);
      if (made === null) throw new InternalError('a stored trusted snapshot key is not a key');
      key = made;
      this.parsed.set(text, key);
    }
    return key;
  }
}
