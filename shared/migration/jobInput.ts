import path from 'node:path';

import { InvalidArgumentError } from '../protocol/errors';
import { validateKey } from '../protocol/keys';
import { checkTenantId } from '../protocol/tenants/tenantIds';

/**
 * The checks of an admin job's input, made by the HTTP route that starts the job and again by
 * every orchestration and activity of it (their input may come from anyone who can reach the
 * durable runtime, not only from the route): a tenant id, a migration source (a root inside one
 * of the configured CAIRN_MIGRATION_SOURCE_ROOTS, a key prefix) and an audit actor. Each throws
 * {@link InvalidArgumentError} naming the field; an activity that throws it fails the job.
 */

export function checkTenant(field: string, tenant: unknown): string {
  checkTenantId(tenant, field);
  return tenant;
}

/**
 * A source root: an absolute folder that is one of `allowed` or inside one (`undefined`: only its
 * shape is checked, for an orchestrator, which reads no configuration; its activities check all).
 */
export function checkSourceRoot(
  field: string,
  root: unknown,
  allowed: readonly string[] | undefined,
): string {
  if (typeof root !== 'string' || root === '')
    throw new InvalidArgumentError(field, 'must be a folder on the host');
  if (allowed?.length === 0) {
    throw new InvalidArgumentError(
      field,
      'no folder may be migrated: CAIRN_MIGRATION_SOURCE_ROOTS lists none on this instance',
    );
  }
  if (root.includes('\0') || !path.isAbsolute(root)) {
    throw new InvalidArgumentError(field, 'must be an absolute path');
  }
  const resolved = path.resolve(root);
  if (allowed === undefined) return resolved;
  if (!allowed.some((base) => isInsideFolder(base, resolved))) {
    throw new InvalidArgumentError(field, 'must be inside a folder of CAIRN_MIGRATION_SOURCE_ROOTS');
  }
  return resolved;
}

/** Whether the absolute path `resolved` is the folder `base` or inside it (by the paths as written). */
export function isInsideFolder(base: string, resolved: string): boolean {
  const relative = path.relative(base, resolved);
  // Outside is `..` or `../…`: a folder inside whose name starts with two dots (`..cache`) is inside.
  const outside = relative === '..' || relative.startsWith(`..${path.sep}`);
  return relative === '' || (!outside && !path.isAbsolute(relative));
}

export function checkPrefix(field: string, prefix: unknown): string {
  if (typeof prefix !== 'string') throw new InvalidArgumentError(field, 'must be empty or a valid key');
  if (prefix === '') return prefix;
  try {
    validateKey(prefix);
  } catch {
    throw new InvalidArgumentError(field, 'must be empty or a valid key');
  }
  return prefix;
}

/** A migration source as the route takes it: `{ root, prefix }`, nothing else. */
export function checkSource(
  field: string,
  source: unknown,
  allowed: readonly string[] | undefined,
): { readonly root: string; readonly prefix: string } {
  if (typeof source !== 'object' || source === null || Array.isArray(source)) {
    throw new InvalidArgumentError(field, 'must be an object');
  }
  const extra = Object.keys(source).find((name) => name !== 'root' && name !== 'prefix');
  if (extra !== undefined) throw new InvalidArgumentError(`${field}.${extra}`, 'is not a known field');
  const { root, prefix } = source as { root?: unknown; prefix?: unknown };
  return {
    root: checkSourceRoot(`${field}.root`, root, allowed),
    prefix: checkPrefix(`${field}.prefix`, prefix),
  };
}

/**
 * The actors a job's audit may name when the configuration can tell: with API keys only, the
 * tenants of the admin keys (the routes start jobs for admins only, and name the key's tenant);
 * undefined with Entra ID tokens (a subject cannot be checked without its token).
 */
export function knownAdminActors(config: {
  readonly apiKeys: readonly { readonly tenant: string; readonly admin: boolean }[];
  readonly entra?: unknown;
}): ReadonlySet<string> | undefined {
  if (config.entra !== undefined) return undefined;
  return new Set(config.apiKeys.filter((entry) => entry.admin).map((entry) => entry.tenant));
}

/**
 * An audit actor as the routes record it (a tenant id or a token subject): printable, at most 256
 * characters, one of `actors` when they are known (undefined: with Entra ID, or in an orchestrator,
 * which reads no configuration). Its `tenant` must be the one the job names
 * (the trail it writes to), when the job names one.
 */
export function checkJobAudit(
  field: string,
  audit: unknown,
  actors: ReadonlySet<string> | undefined,
  tenant?: string,
): { readonly tenant: string; readonly actor: string } | undefined {
  if (audit === undefined) return undefined;
  if (typeof audit !== 'object' || audit === null || Array.isArray(audit)) {
    throw new InvalidArgumentError(field, 'must be an object');
  }
  const { tenant: auditTenant, actor } = audit as { tenant?: unknown; actor?: unknown };
  const checkedTenant = checkTenant(`${field}.tenant`, auditTenant);
  if (tenant !== undefined && checkedTenant !== tenant) {
    throw new InvalidArgumentError(`${field}.tenant`, 'must be the tenant the job works on');
  }
  if (typeof actor !== 'string' || !/^[\x21-\x7e]{1,256}$/.test(actor)) {
    throw new InvalidArgumentError(`${field}.actor`, 'must be 1-256 printable characters');
  }
  if (actors !== undefined && !actors.has(actor)) {
    throw new InvalidArgumentError(`${field}.actor`, 'must be the tenant of an admin credential');
  }
  return { tenant: checkedTenant, actor };
}
