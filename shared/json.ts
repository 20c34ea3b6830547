/**
 * Walks over JSON values that hold no recursion, so that no value, however deeply nested, can
 * overflow the stack: what a caller sends is bounded by {@link MAX_JSON_DEPTH} (the protocol's rule,
 * shared/protocol/json.ts), and what is already stored (written by an older version, or straight
 * into storage) is read whatever its depth.
 */
import { InvalidArgumentError } from './protocol/errors';
import { childrenOf, isContainer, JSON_DEPTH_RULE, MAX_JSON_DEPTH, tooDeepPath } from './protocol/json';

export { JSON_DEPTH_RULE, MAX_JSON_DEPTH, tooDeepPath } from './protocol/json';

/** The deepest nesting of arrays and objects in `value` (0 for a scalar). */
export function jsonDepth(value: unknown): number {
  let deepest = 0;
  const stack: { value: unknown; depth: number }[] = [{ value, depth: 0 }];
  while (stack.length > 0) {
    const { value: current, depth } = stack.pop() as { value: unknown; depth: number };
    if (!isContainer(current)) continue;
    deepest = Math.max(deepest, depth + 1);
    for (const child of childrenOf(current)) stack.push({ value: child, depth: depth + 1 });
  }
  return deepest;
}

/**
 * Throws InvalidArgumentError unless `value` nests at most {@link MAX_JSON_DEPTH} levels. The field
 * named is `field` followed by the first member of `value` the too deep nesting lies in
 * (`value` for a body `{"value": [[[…]]]}` checked as `body`), so that a message says where
 * without spelling out dozens of levels.
 */
export function checkJsonDepth(value: unknown, field: string, max = MAX_JSON_DEPTH): void {
  const path = tooDeepPath(value, max);
  if (path === null) return;
  const where = field === 'body' ? path.slice(0, 1) : [field, ...path.slice(0, 1)];
  throw new InvalidArgumentError(where.length === 0 ? field : where.join('.'), JSON_DEPTH_RULE);
}

/** Every string in a JSON value (object keys excluded), depth first, in member order. */
export function* jsonStrings(value: unknown): Generator<string> {
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const current = stack.pop();
    if (typeof current === 'string') {
      yield current;
    } else if (isContainer(current)) {
      const children = childrenOf(current);
      for (let i = children.length - 1; i >= 0; i--) stack.push(children[i]);
    }
  }
}

/**
 * `JSON.stringify(value)`, also for a value nested too deeply for it (which throws a RangeError on
 * a stack overflow): such a value, which can only come from storage, is then written without
 * recursion. The fallback handles what parsed JSON holds (null, booleans, finite numbers, strings,
 * arrays, plain objects) and `toJSON`, and drops `undefined` members as `JSON.stringify` does.
 */
export function stringifyJson(value: unknown): string {
  try {
    return JSON.stringify(value);
  } catch (error) {
    if (!(error instanceof RangeError)) throw error;
    return stringifyIteratively(value);
  }
}

type Token = { readonly text: string } | { readonly value: unknown };

function stringifyIteratively(root: unknown): string {
  const out: string[] = [];
  const todo: Token[] = [{ value: root }];
  while (todo.length > 0) {
    const token = todo.pop() as Token;
    if ('text' in token) {
      out.push(token.text);
      continue;
    }
    let value = token.value;
    if (isContainer(value) && typeof (value as { toJSON?: unknown }).toJSON === 'function') {
      value = (value as { toJSON: () => unknown }).toJSON();
    }
    if (!isContainer(value)) {
      const text = JSON.stringify(value) as string | undefined;
      out.push(text ?? 'null');
      continue;
    }
    const pending: Token[] = [];
    if (Array.isArray(value)) {
      pending.push({ text: '[' });
      value.forEach((item: unknown, index) => {
        if (index > 0) pending.push({ text: ',' });
        pending.push({ value: item });
      });
      pending.push({ text: ']' });
    } else {
      pending.push({ text: '{' });
      let first = true;
      for (const [name, member] of Object.entries(value)) {
        if (member === undefined || typeof member === 'function' || typeof member === 'symbol') continue;
        pending.push({ text: `${first ? '' : ','}${JSON.stringify(name)}:` });
        pending.push({ value: member });
        first = false;
      }
      pending.push({ text: '}' });
    }
    for (let i = pending.length - 1; i >= 0; i--) todo.push(pending[i] as Token);
  }
  return out.join('');
}
