import type { PrunePart } from '../retention/parts';

/** Expired memory facts one call deletes at most. */
const MEMORY_BATCH = 1000;

/** What the prune run asks of memory facts: delete a tenant's expired facts, at most `limit`. */
export interface ExpiringFacts {
  pruneExpired(tenant: string, limit: number): Promise<{ deleted: number; more: boolean }>;
}

/** Memory's part of the prune run: a tenant's expired facts, a batch at a time within the budget. */
export function memoryPrunePart(memory: ExpiringFacts): PrunePart {
  return {
    name: 'memory',
    prune: async ({ tenant, domains, budget, counts }) => {
      if (!domains.has('memory')) return { complete: true };
      for (;;) {
        const room = Math.min(MEMORY_BATCH, budget.remaining());
        if (room <= 0) return { complete: false };
        const { deleted, more } = await memory.pruneExpired(tenant, room);
        budget.spend(deleted);
        counts.memoryItemsDeleted += deleted;
        if (!more) return { complete: true };
      }
    },
  };
}
