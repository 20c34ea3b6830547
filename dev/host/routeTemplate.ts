/**
 * Function route templates as the Functions host reads them (`kv/{*key}`, `sessions/{sid}`,
 * `{name?}`, `{id:int}`): literal segments match case-insensitively, `{x}` one non-empty segment,
 * `{x?}` an optional last segment, `{*x}` the rest of the path (possibly empty). Constraints after
 * `:` are ignored. Values are percent-decoded segment by segment, as the host's routing decodes
 * the path before it matches (so `%2E%2E` arrives as `..` and key validation refuses it); a
 * malformed escape is left as it is. When several templates match, the most specific wins: more literal segments
 * first, catch-alls last, as in ASP.NET Core routing.
 */
export interface RouteTemplate {
  readonly template: string;
  match(path: string): Record<string, string> | null;
  /** Lower sorts first. */
  readonly rank: readonly number[];
}

type Segment =
  | { kind: 'literal'; text: string }
  | { kind: 'param'; name: string; optional: boolean }
  | { kind: 'catchAll'; name: string };

function parseSegment(text: string): Segment {
  const param = /^\{(\*{1,2})?([A-Za-z_][A-Za-z0-9_]*)(?::[^}?]*)?(\?)?\}$/.exec(text);
  if (param === null) return { kind: 'literal', text: text.toLowerCase() };
  const name = param[2] ?? '';
  if (param[1] !== undefined) return { kind: 'catchAll', name };
  return { kind: 'param', name, optional: param[3] === '?' };
}

function decode(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

export function compileRoute(template: string): RouteTemplate {
  const segments = template
    .split('/')
    .filter((part) => part !== '')
    .map(parseSegment);
  const literals = segments.filter((segment) => segment.kind === 'literal').length;
  const hasCatchAll = segments.some((segment) => segment.kind === 'catchAll');
  return {
    template,
    rank: [hasCatchAll ? 1 : 0, -literals, -segments.length],
    match(path) {
      const parts = path.split('/');
      if (parts.length === 1 && parts[0] === '') parts.length = 0;
      const params: Record<string, string> = {};
      for (const [index, segment] of segments.entries()) {
        const part = parts[index];
        if (segment.kind === 'catchAll') {
          params[segment.name] = parts.slice(index).map(decode).join('/');
          return params;
        }
        if (part === undefined) {
          if (segment.kind === 'param' && segment.optional) continue;
          return null;
        }
        if (segment.kind === 'literal') {
          if (part.toLowerCase() !== segment.text) return null;
        } else {
          if (part === '') return null;
          params[segment.name] = decode(part);
        }
      }
      return parts.length <= segments.length ? params : null;
    },
  };
}

export function compareRanks(a: readonly number[], b: readonly number[]): number {
  for (let index = 0; index < Math.max(a.length, b.length); index++) {
    const difference = (a[index] ?? 0) - (b[index] ?? 0);
    if (difference !== 0) return difference;
  }
  return 0;
}
