import { IntegrityError, InvalidArgumentError, PreconditionFailedError } from '../protocol/errors';
import { POLICY_BODY_RULE, POLICY_FIELDS, RetentionPolicyOverride } from '../protocol/retention';
import { checkTenantId, isValidTenantId } from '../protocol/tenants/tenantIds';
import type { KeyValueStore, KeyValueStoreFactory } from '../storage/keyValueStore';
import { SYSTEM_NAMESPACE } from '../tenants/systemNamespace';

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

// The field rules are the protocol's (shared/protocol/retention.ts), where the route checks them.
export {
  MAX_INTERACTION_DAYS,
  MAX_KEEP_CHECKPOINTS,
  MAX_TTL_SECONDS,
  POLICY_RULES,
} from '../protocol/retention';

/**
 * A policy override from untrusted JSON: an object whose fields are each a field of
 * {@link RetentionPolicy} with a valid value. Throws InvalidArgumentError naming the first field at
 * fault (`policy` when the body is not an object).
 */
export function parsePolicyOverride(body: unknown): PolicyOverride {
  const parsed = RetentionPolicyOverride.safeParse(body);
  if (parsed.success) {
    const override: PolicyOverride = {};
    for (const field of POLICY_FIELDS) {
      const value = parsed.data[field];
      if (value !== undefined) Object.assign(override, { [field]: value });
    }
    return override;
  }
  const issue = parsed.error.issues[0];
  if (issue?.code === 'unrecognized_keys') {
    throw new InvalidArgumentError(
      String(issue.keys[0]),
      `is not a policy field (known: ${POLICY_FIELDS.join(', ')})`,
    );
  }
  const field = issue === undefined || issue.path.length === 0 ? 'policy' : issue.path.map(String).join('.');
  throw new InvalidArgumentError(field, issue?.message ?? POLICY_BODY_RULE);
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
