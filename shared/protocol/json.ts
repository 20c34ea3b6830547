/**
 * The nesting bound of JSON a caller sends (bodies, and JSON carried in a query), checked without
 * recursion so that no value, however deeply nested, can overflow the stack. The domain's JSON
 * helpers (shared/json.ts) build on these.
 */

/**
 * How deeply arrays and objects may nest in a JSON body or in a stored JSON value: `1` and `"a"`
 * are depth 0, `[]` and `{}` depth 1, `{"value": [[1]]}` depth 3. A body counts as a whole, so a
 * value one level down in it (a memory fact's `value`) may nest one level less.
 */
export const MAX_JSON_DEPTH = 64;

export const JSON_DEPTH_RULE = `must not nest arrays and objects more than ${MAX_JSON_DEPTH} levels deep`;

export function isContainer(value: unknown): value is object {
  return typeof value === 'object' && value !== null;
}

export function childrenOf(value: object): unknown[] {
  return Array.isArray(value) ? value : Object.values(value);
}

/**
 * The path of the first array or object nested deeper than `max` in `value` (depth first, in the
 * order of the value's members), or null when there is none. `[]` when `value` is itself too deep
 * because `max` is below 1.
 */
export function tooDeepPath(value: unknown, max = MAX_JSON_DEPTH): string[] | null {
  if (!isContainer(value)) return null;
  if (max < 1) return [];
  // Each frame: the members of one container still to look at, and the path down to it.
  const stack: { names: string[]; values: unknown[]; next: number; path: string[] }[] = [];
  const push = (container: object, path: string[]) => {
    const names = Array.isArray(container)
      ? container.map((_, index) => String(index))
      : Object.keys(container);
    stack.push({ names, values: childrenOf(container), next: 0, path });
  };
  push(value, []);
  while (stack.length > 0) {
    const frame = stack[stack.length - 1] as (typeof stack)[number];
    if (frame.next >= frame.values.length) {
      stack.pop();
      continue;
    }
    const index = frame.next++;
    const child = frame.values[index];
    if (!isContainer(child)) continue;
    const path = [...frame.path, frame.names[index] as string];
    if (stack.length + 1 > max) return path;
    push(child, path);
  }
  return null;
}
