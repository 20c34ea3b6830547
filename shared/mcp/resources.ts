import { actorOf } from '../auth';
import { checkFactKey, checkNamespace } from '../memory/facts';
import { InvalidArgumentError, NotFoundError } from '../protocol/errors';
import { MAX_SEARCH_OFFSET } from '../protocol/memory';
import { type ToolCall, valueJson } from './tools';

/**
 * The MCP resources (docs/mcp.md): the caller's facts as `cairn://memory/{namespace}/{key}` and
 * its keys as `cairn://kv/{key}`, each segment percent-encoded on its own (a `/` inside a fact key
 * is `%2F`; the namespace's own `/`s stay). Listing walks the facts, then the keys, one page per
 * call; the cursor is opaque.
 */

export const MEMORY_PREFIX = 'cairn://memory/';
export const KV_PREFIX = 'cairn://kv/';
/** Resources per listed page. */
export const RESOURCE_PAGE = 100;

export const RESOURCE_TEMPLATES = [
  {
    uriTemplate: 'cairn://memory/{namespace}/{key}',
    name: 'fact',
    title: 'A memory fact',
    description:
      'A fact of long-term memory: the namespace (its "/"-separated segments) and the key, each segment percent-encoded. Reads as the fact JSON (value, ETag, times).',
    mimeType: 'application/json',
  },
  {
    uriTemplate: 'cairn://kv/{key}',
    name: 'value',
    title: 'A key/value entry',
    description:
      "A value of the key/value store, its key's segments percent-encoded. Reads as text when the value is UTF-8, else as a base64 blob.",
    mimeType: 'application/octet-stream',
  },
] as const;

const encodePath = (segments: readonly string[]) => segments.map(encodeURIComponent).join('/');

export const factUri = (namespace: readonly string[], key: string) =>
  `${MEMORY_PREFIX}${encodePath(namespace)}/${encodeURIComponent(key)}`;
export const kvUri = (key: string) => `${KV_PREFIX}${encodePath(key.split('/'))}`;

function decodeSegments(rest: string): string[] {
  try {
    return rest.split('/').map(decodeURIComponent);
  } catch {
    throw new InvalidArgumentError('uri', 'has a segment that is not valid percent-encoding');
  }
}

interface Cursor {
  /** Facts listed so far (the search offset), or null once the facts are done. */
  readonly facts: number | null;
  /** The key/value listing's own cursor, once the facts are done. */
  readonly keys?: string;
}

function cursorOf(text: string | undefined): Cursor {
  if (text === undefined) return { facts: 0 };
  try {
    const value = JSON.parse(Buffer.from(text, 'base64url').toString('utf8')) as Record<string, unknown>;
    const facts = value['facts'];
    const keys = value['keys'];
    const factsOk = facts === null || (Number.isSafeInteger(facts) && (facts as number) >= 0);
    const keysOk = keys === undefined || (typeof keys === 'string' && keys !== '');
    if (factsOk && keysOk) return value as unknown as Cursor;
  } catch {
    // reported below
  }
  throw new InvalidArgumentError('cursor', 'is not a cursor this server gave out');
}

const cursorText = (cursor: Cursor) => Buffer.from(JSON.stringify(cursor), 'utf8').toString('base64url');

export interface ListedResource {
  readonly uri: string;
  readonly name: string;
  readonly mimeType: string;
}

/** One page of the caller's resources: facts first (while memory is configured), then keys. */
export async function listResources(
  call: ToolCall,
  cursorTextIn: string | undefined,
): Promise<{ resources: ListedResource[]; nextCursor?: string }> {
  const cursor = cursorOf(cursorTextIn);
  const memory = call.services.memory;
  const caller = { tenant: call.principal.tenant, actor: actorOf(call.principal) };
  if (cursor.facts !== null && memory !== undefined) {
    const page = await memory.search(caller, { namespace: '', limit: RESOURCE_PAGE, offset: cursor.facts });
    const resources = page.items.map((item) => ({
      uri: factUri(item.namespace, item.key),
      name: `${item.namespace.join('/')}/${item.key}`,
      mimeType: 'application/json',
    }));
    // Search pages reach offset MAX_SEARCH_OFFSET at most: further facts are found by search_memory.
    const next = cursor.facts + RESOURCE_PAGE;
    const more = page.items.length === RESOURCE_PAGE && next <= MAX_SEARCH_OFFSET;
    return { resources, nextCursor: cursorText(more ? { facts: next } : { facts: null }) };
  }
  const page = await call.services.kvStores.forTenant(call.principal.tenant).list({
    limit: RESOURCE_PAGE,
    ...(cursor.keys === undefined ? {} : { cursor: cursor.keys }),
  });
  const resources = page.keys.map((key) => ({
    uri: kvUri(key),
    name: key,
    mimeType: 'application/octet-stream',
  }));
  return page.cursor === null
    ? { resources }
    : { resources, nextCursor: cursorText({ facts: null, keys: page.cursor }) };
}

export type ResourceContents =
  { uri: string; mimeType: string; text: string } | { uri: string; mimeType: string; blob: string };

/** Reads one resource of the caller's tenant; absent is not_found, a URI of neither kind invalid. */
export async function readResource(call: ToolCall, uri: string): Promise<ResourceContents> {
  if (uri.startsWith(MEMORY_PREFIX)) {
    const segments = decodeSegments(uri.slice(MEMORY_PREFIX.length));
    const key = segments.pop() ?? '';
    const namespace = segments.join('/');
    checkNamespace(namespace, 'uri (namespace)');
    checkFactKey(key, 'uri (key)');
    const memory = call.services.memory;
    if (memory === undefined) throw new NotFoundError('memory is not configured on this server');
    const item = await memory.recall(
      { tenant: call.principal.tenant, actor: actorOf(call.principal) },
      namespace,
      key,
    );
    if (item === null) throw new NotFoundError('no fact is stored under this namespace and key');
    return { uri, mimeType: 'application/json', text: JSON.stringify(item) };
  }
  if (uri.startsWith(KV_PREFIX)) {
    const key = decodeSegments(uri.slice(KV_PREFIX.length)).join('/');
    const stored = await call.services.kvStores.forTenant(call.principal.tenant).read(key);
    if (stored === null) throw new NotFoundError('no value is stored at this key');
    const { encoding, value } = valueJson(stored.value);
    return encoding === 'utf8'
      ? { uri, mimeType: 'text/plain', text: value }
      : { uri, mimeType: 'application/octet-stream', blob: value };
  }
  throw new InvalidArgumentError('uri', `must start with ${MEMORY_PREFIX} or ${KV_PREFIX}`);
}
