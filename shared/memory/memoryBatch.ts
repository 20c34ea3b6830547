import { InvalidArgumentError } from '../protocol/errors';
import { type BatchOperation as Operation, batchOperations as operationSchemas } from '../protocol/memory';
import type { WriteConditions } from '../storage/keyValueStore';
import type { Caller, MemoryFacts } from './memory';
import { checkFilter } from './valueFilter';

/**
 * A batch of memory operations in one request (`POST /api/memory/batch`, docs/memory.md): what
 * LangGraph's `BaseStore.batch` hands a store (get, put, delete, search, listNamespaces), run in
 * order and answered in order, each with its result or its own error.
 *
 * - Not atomic: each operation succeeds or fails on its own (a bad one, or one whose condition
 *   fails, gives its error and the others go on), and a later operation sees what the earlier
 *   ones wrote. Per operation, the semantics are its route's: the same checks and errors, the same
 *   compare-and-swap, an audit record per write.
 * - Puts without a condition that follow one another are stored together
 *   (`MemoryFacts.rememberMany`: on Table Storage one transaction per up to 98 facts when this
 *   instance knows their versions, or they are new); everything else runs as its route would.
 */

/** One operation's answer: its result, or the error it failed with (the route's error). */
export type BatchOutcome = { readonly result: Record<string, unknown> } | { readonly error: unknown };

/** Runs the operations in order (see above); never throws for one operation's fault. */
export async function runMemoryBatch(
  memory: MemoryFacts,
  caller: Caller,
  operations: readonly unknown[],
): Promise<BatchOutcome[]> {
  const outcomes: BatchOutcome[] = [];
  let next = 0;
  while (next < operations.length) {
    const at = next;
    let parsed: Operation;
    try {
      parsed = parseOperation(operations[at], at);
    } catch (error) {
      outcomes.push({ error });
      next++;
      continue;
    }
    if (parsed.op === 'put' && parsed.ifMatch === undefined && parsed.ifNoneMatch === undefined) {
      // This put and the unconditional puts right after it, stored together.
      const run: { at: number; put: Extract<Operation, { op: 'put' }> }[] = [{ at, put: parsed }];
      const failed = new Map<number, unknown>();
      for (next = at + 1; next < operations.length; next++) {
        let following: Operation;
        try {
          following = parseOperation(operations[next], next);
        } catch (error) {
          // A bad put ends nothing: it fails alone, in its place.
          if (isPut(operations[next])) {
            failed.set(next, error);
            continue;
          }
          break;
        }
        if (following.op !== 'put' || following.ifMatch !== undefined || following.ifNoneMatch !== undefined)
          break;
        run.push({ at: next, put: following });
      }
      const stored = await memory.rememberMany(
        caller,
        run.map(({ put }) => ({
          namespace: put.namespace,
          key: put.key,
          value: put.value,
          ...(put.ttl === undefined ? {} : { ttl: put.ttl }),
          ...(put.vectors === undefined ? {} : { vectors: put.vectors }),
        })),
      );
      const byPlace = new Map(run.map(({ at: place }, i) => [place, stored[i]]));
      for (let place = at; place < next; place++) {
        const outcome = byPlace.get(place);
        if (outcome === undefined) outcomes.push({ error: failed.get(place) });
        else if ('error' in outcome) outcomes.push({ error: named(outcome.error, place) });
        else outcomes.push({ result: { item: outcome.item, created: outcome.created } });
      }
      continue;
    }
    next++;
    try {
      outcomes.push({ result: await runOne(memory, caller, parsed) });
    } catch (error) {
      outcomes.push({ error: named(error, at) });
    }
  }
  return outcomes;
}

function isPut(operation: unknown): boolean {
  return typeof operation === 'object' && operation !== null && (operation as { op?: unknown }).op === 'put';
}

async function runOne(
  memory: MemoryFacts,
  caller: Caller,
  operation: Operation,
): Promise<Record<string, unknown>> {
  switch (operation.op) {
    case 'get':
      return { item: await memory.recall(caller, operation.namespace, operation.key) };
    case 'put': {
      const { item, created } = await memory.remember(
        caller,
        operation.namespace,
        operation.key,
        operation.value,
        {
          conditions: conditionsOf(operation),
          ...(operation.ttl === undefined ? {} : { ttl: operation.ttl }),
          ...(operation.vectors === undefined ? {} : { vectors: operation.vectors }),
        },
      );
      return { item, created };
    }
    case 'delete':
      return {
        deleted: await memory.forget(caller, operation.namespace, operation.key, conditionsOf(operation)),
      };
    case 'search': {
      const { filter, ...search } = withoutOp(operation);
      return {
        ...(await memory.search(caller, {
          ...withoutUndefined(search),
          ...(filter === undefined ? {} : { filter: checkFilter(filter) }),
        })),
      };
    }
    case 'listNamespaces': {
      return { ...(await memory.listNamespaces(caller, withoutUndefined(withoutOp(operation)))) };
    }
  }
}

function withoutOp<T extends { op: string }>(operation: T): Omit<T, 'op'> {
  const copy: Partial<T> = { ...operation };
  delete copy.op;
  return copy as Omit<T, 'op'>;
}

function conditionsOf(operation: {
  ifMatch?: string | undefined;
  ifNoneMatch?: '*' | undefined;
}): WriteConditions {
  return {
    ...(operation.ifMatch === undefined ? {} : { ifMatch: operation.ifMatch }),
    ...(operation.ifNoneMatch === undefined ? {} : { ifAbsent: true }),
  };
}

function withoutUndefined<T extends Record<string, unknown>>(
  record: T,
): { [K in keyof T]: Exclude<T[K], undefined> } {
  return Object.fromEntries(Object.entries(record).filter(([, value]) => value !== undefined)) as {
    [K in keyof T]: Exclude<T[K], undefined>;
  };
}

/** The operation at `at`, its shape checked; 400 naming `operations.<at>.<field>`. */
function parseOperation(input: unknown, at: number): Operation {
  const op = typeof input === 'object' && input !== null ? (input as { op?: unknown }).op : undefined;
  if (typeof op !== 'string' || !Object.hasOwn(operationSchemas, op)) {
    throw new InvalidArgumentError(
      `operations.${at}.op`,
      `must be one of ${Object.keys(operationSchemas).join(', ')}`,
    );
  }
  const result = operationSchemas[op as keyof typeof operationSchemas].safeParse(input);
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  if (issue?.code === 'unrecognized_keys') {
    throw new InvalidArgumentError(`operations.${at}.${issue.keys[0] ?? ''}`, 'is not a known field');
  }
  const field = [at, ...(issue?.path ?? [])].map(String).join('.');
  throw new InvalidArgumentError(`operations.${field}`, issue?.message ?? 'is invalid');
}

/** An operation's 400 naming the field within the batch (`operations.3.key`); other errors as they are. */
function named(error: unknown, at: number): unknown {
  if (!(error instanceof InvalidArgumentError)) return error;
  const prefix = `operations.${at}.`;
  if (error.field.startsWith(prefix)) return error;
  // The route's header is the operation's field here.
  const field = error.field === 'If-Match' ? 'ifMatch' : error.field;
  return new InvalidArgumentError(`${prefix}${field}`, error.message.slice(error.field.length + 2));
}
