import type { PruneBudget, PruneCounts } from '../retention/budget';
import { deleteListed, listAllItems } from '../retention/deletion';
import type { PrunePart } from '../retention/parts';
import type { KeyValueStore, KeyValueStoreFactory } from '../storage/keyValueStore';

/**
 * Retention of the interaction log (docs/coordination.md): one key per UTC day,
 * `interactions/<YYYY-MM-DD>.jsonl`. With `days` = n, the log of the last n UTC days (today
 * included) stays and every earlier day's key is deleted. Each key is counted by the run whose
 * delete removed it.
 */

const DAY_KEY = /^interactions\/(\d{4}-\d{2}-\d{2})\.jsonl$/;

/** The first UTC day (YYYY-MM-DD) kept with `days` days of log at `now`. */
export function firstKeptDay(now: number, days: number): string {
  return new Date(now - (days - 1) * 86_400_000).toISOString().slice(0, 10);
}

/** False when the budget ran out. */
export async function pruneInteractions(options: {
  readonly store: KeyValueStore;
  readonly days: number;
  readonly now: number;
  readonly budget: PruneBudget;
  readonly counts: PruneCounts;
}): Promise<boolean> {
  const first = firstKeptDay(options.now, options.days);
  for await (const page of listAllItems(options.store, 'interactions/')) {
    const doomed = page.filter((item) => {
      const day = DAY_KEY.exec(item.key)?.[1];
      return day !== undefined && day < first;
    });
    if (!(await deleteListed(options.store, doomed, options.budget, options.counts, { onVersion: false }))) {
      return false;
    }
  }
  return true;
}

/**
 * The interaction log's part of the prune run: once a day per tenant with key/value data and an
 * `interactionDays` policy, the days before the first kept one go; the day is recorded when done.
 */
export function interactionPrunePart(kvStores: KeyValueStoreFactory): PrunePart {
  return {
    name: 'interactions',
    prune: async ({ tenant, domains, policy, now, budget, counts, state }) => {
      const today = new Date(now).toISOString().slice(0, 10);
      const days = policy.interactionDays;
      if (!domains.has('kv') || days === null || state.interactionsPrunedOn === today)
        return { complete: true };
      const done = await pruneInteractions({ store: kvStores.forTenant(tenant), days, now, budget, counts });
      return {
        complete: done,
        ...(done
          ? { settle: (s) => (s.interactionsPrunedOn === today ? s : { ...s, interactionsPrunedOn: today }) }
          : {}),
      };
    },
  };
}
