/**
 * The hook `cairn verify` calls to check a tenant's audit trail (its hash chain). The audit trail
 * itself is kept elsewhere; until it is configured, every check answers that it was not checked
 * because auditing is off. An implementation reports a broken chain as `broken` with the first bad
 * record, never throws for a broken chain (a storage fault may throw).
 */
export type AuditChainResult =
  | { readonly status: 'not_checked'; readonly reason: string }
  | { readonly status: 'ok'; readonly records: number }
  | { readonly status: 'broken'; readonly records: number; readonly firstBroken: number };

export interface AuditChainCheck {
  check(tenant: string): Promise<AuditChainResult>;
}

/** Auditing off: nothing to check. */
export const auditingOff: AuditChainCheck = {
  check: async () => ({ status: 'not_checked', reason: 'auditing off' }),
};
