import { IntegrityError, InvalidArgumentError, PreconditionFailedError } from '../errors';
import type { KeyValueStore, KeyValueStoreFactory } from '../storage/keyValueStore';
import { SYSTEM_NAMESPACE } from '../tenants/systemNamespace';
import { checkTenantId, isValidTenantId } from '../tenants/tenantIds';

/**
 * Retention policies (docs/retention.md): how long a tenant's data is kept. Applied only when prune
 * runs; nothing is deleted otherwise. The defaults come from the CAIRN_RETENTION_* settings (keep
 * everything when unset); an admin may override any field per tenant. Expired memory facts are
 * removed whatever the policy.
 */
export interface RetentionPolicy {
  /** Delete threads whose last change is at least this old; null: keep threads. */
  readonly threadTtlSeconds: number | null;
  /** Keep each namespace's head and its n - 1 ancestors; older checkpoints and branches go. */
  readonly keepCheckpoints: number | null;
  /** Delete the branches rewinds left behind (checkpoints on no head's chain); keep every head chain. */
  readonly dropBranches: boolean;
  /** Delete archive sessions whose last published checkpoint is at least this old. */
  readonly sessionTtlSeconds: number | null;
  /** Keep the interaction log of the last n UTC days (today included). */
  readonly interactionDays: number | null;
}

/** A tenant's override: each field given replaces the default (null: keep everything for it). */
export type PolicyOverride = { -readonly [K in keyof RetentionPolicy]?: RetentionPolicy[K] };

export const KEEP_EVERYTHING: RetentionPolicy = {
  threadTtlSeconds: null,
  keepCheckpoints: null,
  dropBranches: false,
  sessionTtlSeconds: null,
  interactionDays: null,
};

/** A policy body: five fields at most. */
export const MAX_POLICY_BODY_BYTES = 4 * 1024;

/** Ten years: a longer time to live is a mistake, not a policy. */
export const MAX_TTL_SECONDS = 315_360_000;
export const MAX_KEEP_CHECKPOINTS = 100_000;
export const MAX_INTERACTION_DAYS = 36_500;

/** The rule of each field, for messages and the API description. */
export const POLICY_RULES: Readonly<Record<keyof RetentionPolicy, string>> = {
  threadTtlSeconds: `must be a whole number of seconds from 1 to ${MAX_TTL_SECONDS}, or null`,
  keepCheckpoints: `must be a whole number from 1 to ${MAX_KEEP_CHECKPOINTS}, or null`,
  dropBranches: 'must be true or false',
  sessionTtlSeconds: `must be a whole number of seconds from 1 to ${MAX_TTL_SECONDS}, or null`,
  interactionDays: `must be a whole number of days from 1 to ${MAX_INTERACTION_DAYS}, or null`,
};

const LIMITS: Readonly<Record<Exclude<keyof RetentionPolicy, 'dropBranches'>, number>> = {
  threadTtlSeconds: MAX_TTL_SECONDS,
  keepCheckpoints: MAX_KEEP_CHECKPOINTS,
  sessionTtlSeconds: MAX_TTL_SECONDS,
  interactionDays: MAX_INTERACTION_DAYS,
};

const FIELDS = Object.keys(KEEP_EVERYTHING) as (keyof RetentionPolicy)[];

/**
 * A policy override from untrusted JSON: an object whose fields are each a field of
 * {@link RetentionPolicy} with a valid value. Throws InvalidArgumentError naming the first field at
 * fault (`policy` when the body is not an object).
 */
export function parsePolicyOverride(body: unknown): PolicyOverride {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new InvalidArgumentError('policy', 'must be a JSON object of policy fields');
  }
  const override: PolicyOverride = {};
  for (const [field, value] of Object.entries(body)) {
    if (!(FIELDS as string[]).includes(field)) {
      throw new InvalidArgumentError(field, `is not a policy field (known: ${FIELDS.join(', ')})`);
    }
    const name = field as keyof RetentionPolicy;
    if (name === 'dropBranches') {
      if (typeof value !== 'boolean') throw new InvalidArgumentError(name, POLICY_RULES.dropBranches);
      override.dropBranches = value;
      continue;
    }
    if (value === null) {
      override[name] = null;
      continue;
    }
    if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > LIMITS[name]) {
      throw new InvalidArgumentError(name, POLICY_RULES[name]);
    }
    override[name] = value;
  }
  return override;
}

/** The policy in force: the override's fields over the defaults. */
export function effectivePolicy(defaults: RetentionPolicy, override: PolicyOverride | null): RetentionPolicy {
  return { ...defaults, ...(override ?? {}) };
}

/** True when the policy deletes anything beyond expired memory facts and garbage. */
export function deletesData(policy: RetentionPolicy): boolean {
  return (
    policy.threadTtlSeconds !== null ||
    policy.keepCheckpoints !== null ||
    policy.dropBranches ||
    policy.sessionTtlSeconds !== null ||
    policy.interactionDays !== null
  );
}

const PREFIX = 'retention/policies/';
const PAGE_SIZE = 5000;

/**
 * The per-tenant overrides, one key per tenant (`retention/policies/<tenant>`, JSON) in the system
 * namespace of the key/value store. Written by admins only; a write replaces the override whole.
 */
export class RetentionPolicies {
  private readonly store: KeyValueStore;

  constructor(
    kvStores: KeyValueStoreFactory,
    readonly defaults: RetentionPolicy,
  ) {
    this.store = kvStores.forTenant(SYSTEM_NAMESPACE);
  }

  async override(tenant: string): Promise<PolicyOverride | null> {
    checkTenantId(tenant);
    const stored = await this.store.read(PREFIX + tenant);
    return stored === null ? null : decode(stored.value, tenant);
  }

  async set(tenant: string, override: PolicyOverride): Promise<void> {
    checkTenantId(tenant);
    await this.store.write(PREFIX + tenant, Buffer.from(JSON.stringify(override)));
  }

  /** False when the tenant had no override. */
  async remove(tenant: string): Promise<boolean> {
    checkTenantId(tenant);
    try {
      return await this.store.delete(PREFIX + tenant);
    } catch (error) {
      if (error instanceof PreconditionFailedError) return false;
      throw error;
    }
  }

  /** Every override, by tenant: one listing, then a read of each (usually few tenants have one). */
  async all(): Promise<Map<string, PolicyOverride>> {
    const overrides = new Map<string, PolicyOverride>();
    let cursor: string | undefined;
    const keys: string[] = [];
    do {
      const page = await this.store.list({
        prefix: PREFIX,
        limit: PAGE_SIZE,
        ...(cursor === undefined ? {} : { cursor }),
      });
      keys.push(...page.keys);
      cursor = page.cursor ?? undefined;
    } while (cursor !== undefined);
    for (const key of keys) {
      const tenant = key.slice(PREFIX.length);
      if (!isValidTenantId(tenant)) continue;
      const stored = await this.store.read(key);
      if (stored !== null) overrides.set(tenant, decode(stored.value, tenant));
    }
    return overrides;
  }
}

function decode(bytes: Buffer, tenant: string): PolicyOverride {
  try {
    return parsePolicyOverride(JSON.parse(bytes.toString('utf8')));
  } catch (error) {
    throw new IntegrityError(
      `the stored retention policy of tenant ${tenant} is not valid`,
      {},
      { cause: error },
    );
  }
}
