import { createHash } from 'node:crypto';

import { z } from 'zod';

import { canonicalJson } from '../canonicalJson.js';
import { hasControlCharacter } from '../controlCharacters.js';
import { InvalidArgumentError } from '../errors.js';
import { MAX_MANIFEST_BYTES, MAX_PUBLISH_BODY_BYTES } from '../snapshots.js';
import { isValidWorkspaceId, SHA256_RULE, WORKSPACE_ID_RULE } from './identifiers.js';

/**
 * The snapshot manifest (docs/snapshots.md), the one definition used by the service (publish), the
 * client (save, load, verify) and the tests:
 *
 *     {"createdAt":"…","files":[{"mode":420,"path":"a.txt","sha256":"…","size":3}],
 *      "symlinks":[{"source":"l","target":"a.txt"}],"version":1,"workspaceId":"w1"}
 *
 * Its bytes are canonical: JSON with the keys of every object sorted (by UTF-16 code units, as in
 * RFC 8785; every key here is ASCII), no whitespace, UTF-8, files sorted by `path` and symlinks by
 * `source` in UTF-8 byte order. So the bytes are a function of the content, the SHA-256 of the
 * bytes is the snapshot id, and the Ed25519 signature covers exactly those bytes. Bytes that parse
 * but are not canonical are refused, never re-serialised: what is signed is what is stored.
 *
 * Paths are POSIX and relative to the workspace root: `/`-separated non-empty segments, no `.` or
 * `..` segment, no leading `/`, no `\`, no control characters, valid Unicode, at most 4,096 bytes
 * (255 per segment). No entry lies below a file or a symlink of the manifest (so that writing a
 * file can never follow a link), and no path is listed twice. A symlink's target is kept verbatim;
 * one that leaves the workspace (absolute, or climbing above the root, following the manifest's own
 * links) is refused unless the caller allows it.
 */

export const MANIFEST_VERSION = 1;
// The manifest's size and the publish body's limit are the protocol's (shared/protocol/snapshots.ts).
export { MAX_MANIFEST_BYTES, MAX_PUBLISH_BODY_BYTES };
const MAX_PATH_BYTES = 4096;
const MAX_SEGMENT_BYTES = 255;
/** Links followed while resolving a target before it counts as leaving the workspace (as ELOOP). */
const MAX_LINK_HOPS = 40;

export interface SnapshotFile {
  readonly path: string;
  /** Lowercase hex SHA-256 of the file's bytes. */
  readonly sha256: string;
  readonly size: number;
  /** Permission bits (`mode & 0o7777`). */
  readonly mode: number;
}

export interface SnapshotSymlink {
  readonly source: string;
  /** The link's target, verbatim (relative targets stay relative). */
  readonly target: string;
}

export interface SnapshotManifest {
  readonly version: typeof MANIFEST_VERSION;
  readonly workspaceId: string;
  /** RFC 3339, UTC. */
  readonly createdAt: string;
  readonly files: readonly SnapshotFile[];
  readonly symlinks: readonly SnapshotSymlink[];
}

export interface ManifestRules {
  /** Accept symlinks whose target leaves the workspace (default false). */
  readonly allowExternalSymlinks?: boolean;
}

/** Why `value` is not a valid workspace path, or null when it is. */
export function pathProblem(value: string): string | null {
  if (value.length === 0) return 'must not be empty';
  if (!value.isWellFormed()) return 'must be valid Unicode';
  if (Buffer.byteLength(value, 'utf8') > MAX_PATH_BYTES) return `must be at most ${MAX_PATH_BYTES} bytes`;
  if (hasControlCharacter(value)) return 'must not contain control characters';
  if (value.includes('\\')) return 'must not contain a backslash (paths are POSIX)';
  if (value.startsWith('/')) return 'must be relative (no leading "/")';
  for (const segment of value.split('/')) {
    if (segment === '') return 'must not have an empty segment or a trailing "/"';
    if (segment === '.' || segment === '..') return 'must not have a "." or ".." segment';
    if (Buffer.byteLength(segment, 'utf8') > MAX_SEGMENT_BYTES) {
      return `must not have a segment over ${MAX_SEGMENT_BYTES} bytes`;
    }
  }
  return null;
}

function targetProblem(value: string): string | null {
  if (value.length === 0) return 'must not be empty';
  if (!value.isWellFormed()) return 'must be valid Unicode';
  if (Buffer.byteLength(value, 'utf8') > MAX_PATH_BYTES) return `must be at most ${MAX_PATH_BYTES} bytes`;
  if (hasControlCharacter(value)) return 'must not contain control characters';
  if (value.includes('\\')) return 'must not contain a backslash (paths are POSIX)';
  return null;
}

/** UTF-8 byte order, the order of entries in a manifest. */
export function compareUtf8(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}

/** The canonical bytes of a manifest: its entries sorted, then {@link canonicalJson}. */
export function serializeManifest(manifest: SnapshotManifest): Buffer {
  const files = [...manifest.files]
    .sort((a, b) => compareUtf8(a.path, b.path))
    .map(({ path, sha256, size, mode }) => ({ path, sha256, size, mode }));
  const symlinks = [...manifest.symlinks]
    .sort((a, b) => compareUtf8(a.source, b.source))
    .map(({ source, target }) => ({ source, target }));
  const { version, workspaceId, createdAt } = manifest;
  return Buffer.from(canonicalJson({ version, workspaceId, createdAt, files, symlinks }), 'utf8');
}

/** The snapshot id of manifest bytes: their SHA-256, lowercase hex. */
export function snapshotIdOf(manifestBytes: Buffer): string {
  return createHash('sha256').update(manifestBytes).digest('hex');
}

const RFC3339_UTC = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?Z$/;

const manifestSchema = z.strictObject({
  version: z.literal(MANIFEST_VERSION),
  workspaceId: z.string({ error: WORKSPACE_ID_RULE }).refine(isValidWorkspaceId, WORKSPACE_ID_RULE),
  createdAt: z
    .string({ error: 'must be an RFC 3339 UTC time' })
    .refine(
      (value) => RFC3339_UTC.test(value) && !Number.isNaN(Date.parse(value)),
      'must be an RFC 3339 UTC time (e.g. 2026-11-29T21:16:51.123Z)',
    ),
  files: z.array(
    z.strictObject({
      path: z.string({ error: 'must be a string' }),
      sha256: z.string({ error: SHA256_RULE }).regex(/^[0-9a-f]{64}$/, SHA256_RULE),
      size: z
        .number({ error: 'must be a whole number of bytes' })
        .int('must be a whole number of bytes')
        .min(0, 'must not be negative')
        .max(Number.MAX_SAFE_INTEGER, 'is too large'),
      mode: z
        .number({ error: 'must be the permission bits (0-4095)' })
        .int('must be the permission bits (0-4095)')
        .min(0, 'must be the permission bits (0-4095)')
        .max(0o7777, 'must be the permission bits (0-4095)'),
    }),
    { error: 'must be an array of files' },
  ),
  symlinks: z.array(
    z.strictObject({
      source: z.string({ error: 'must be a string' }),
      target: z.string({ error: 'must be a string' }),
    }),
    { error: 'must be an array of symlinks' },
  ),
});

function fail(field: string, message: string): never {
  throw new InvalidArgumentError(field, message);
}

/**
 * Parses and checks manifest bytes, in this order: size, UTF-8, JSON, `version`, the shape of every
 * field, every path and target, entries sorted and unique, no entry below a file or symlink, the
 * canonical form, files of one SHA-256 of one size, and symlinks that stay inside the workspace
 * (unless `allowExternalSymlinks`). Throws InvalidArgumentError naming the field
 * (`manifest.files.3.path`) and the problem.
 */
export function parseManifest(bytes: Buffer, rules: ManifestRules = {}): SnapshotManifest {
  if (bytes.length > MAX_MANIFEST_BYTES) fail('manifest', `must be at most ${MAX_MANIFEST_BYTES} bytes`);
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch {
    fail('manifest', 'must be UTF-8');
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    fail('manifest', 'must be JSON');
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    fail('manifest', 'must be a JSON object');
  }
  const version = (value as { version?: unknown }).version;
  if (version !== MANIFEST_VERSION) {
    fail('manifest.version', `must be ${MANIFEST_VERSION} (got ${JSON.stringify(version) ?? 'nothing'})`);
  }
  const result = manifestSchema.safeParse(value);
  if (!result.success) {
    const issue = result.error.issues[0];
    if (issue?.code === 'unrecognized_keys') {
      fail(['manifest', ...issue.path, issue.keys[0] ?? ''].map(String).join('.'), 'is not a known field');
    }
    fail(['manifest', ...(issue?.path ?? [])].map(String).join('.'), issue?.message ?? 'is invalid');
  }
  const manifest = result.data;

  for (const [index, file] of manifest.files.entries()) {
    const problem = pathProblem(file.path);
    if (problem !== null) fail(`manifest.files.${index}.path`, problem);
  }
  for (const [index, link] of manifest.symlinks.entries()) {
    const problem = pathProblem(link.source);
    if (problem !== null) fail(`manifest.symlinks.${index}.source`, problem);
    const target = targetProblem(link.target);
    if (target !== null) fail(`manifest.symlinks.${index}.target`, target);
  }
  checkSorted(manifest.files, (file) => file.path, 'files', 'path');
  checkSorted(manifest.symlinks, (link) => link.source, 'symlinks', 'source');
  checkTree(manifest);
  if (!serializeManifest(manifest).equals(bytes)) {
    fail('manifest', 'must be canonical JSON: keys sorted at every level, no whitespace, UTF-8');
  }
  const sizes = new Map<string, number>();
  for (const [index, file] of manifest.files.entries()) {
    const size = sizes.get(file.sha256);
    if (size !== undefined && size !== file.size) {
      fail(`manifest.files.${index}.size`, 'differs from another file with the same sha256');
    }
    sizes.set(file.sha256, file.size);
  }
  if (rules.allowExternalSymlinks !== true) {
    const links = new Map(manifest.symlinks.map((link) => [link.source, link.target]));
    for (const [index, link] of manifest.symlinks.entries()) {
      if (!staysInside(link.source, link.target, links)) {
        fail(
          `manifest.symlinks.${index}.target`,
          `leaves the workspace (${link.source} -> ${link.target}); allow external symlinks to keep it`,
        );
      }
    }
  }
  return manifest;
}

function checkSorted<T>(
  entries: readonly T[],
  name: (entry: T) => string,
  list: string,
  field: string,
): void {
  for (let index = 1; index < entries.length; index++) {
    const order = compareUtf8(name(entries[index - 1] as T), name(entries[index] as T));
    if (order === 0) fail(`manifest.${list}.${index}.${field}`, 'is listed twice');
    if (order > 0)
      fail(
        `manifest.${list}.${index}.${field}`,
        `must come after the previous ${field} (sorted by UTF-8 bytes)`,
      );
  }
}

/** Every path once across files and symlinks, and none below a file or a symlink. */
function checkTree(manifest: SnapshotManifest): void {
  const leaves = new Map<string, string>();
  const entries: [string, string][] = [
    ...manifest.files.map((file, index): [string, string] => [file.path, `manifest.files.${index}.path`]),
    ...manifest.symlinks.map((link, index): [string, string] => [
      link.source,
      `manifest.symlinks.${index}.source`,
    ]),
  ];
  for (const [path, field] of entries) {
    if (leaves.has(path)) fail(field, `${path} is both a file and a symlink`);
    leaves.set(path, field);
  }
  for (const [path, field] of entries) {
    for (let slash = path.indexOf('/'); slash !== -1; slash = path.indexOf('/', slash + 1)) {
      const ancestor = path.slice(0, slash);
      if (leaves.has(ancestor)) fail(field, `lies below ${ancestor}, which is a file or a symlink`);
    }
  }
}

/**
 * True when `target`, read from the folder of `source`, stays inside the workspace: it is relative,
 * never climbs above the root, and neither does any link of the manifest it passes through
 * (`links`: source → target). Folders the manifest does not list are taken as plain folders. A
 * chain of more than 40 links counts as leaving.
 */
export function staysInside(source: string, target: string, links: ReadonlyMap<string, string>): boolean {
  if (target.startsWith('/')) return false;
  const folder = source.split('/').slice(0, -1);
  let pending = target.split('/');
  let hops = 0;
  while (pending.length > 0) {
    const [component, ...rest] = pending;
    pending = rest;
    if (component === undefined || component === '' || component === '.') continue;
    if (component === '..') {
      if (folder.length === 0) return false;
      folder.pop();
      continue;
    }
    folder.push(component);
    const link = links.get(folder.join('/'));
    if (link !== undefined) {
      if (++hops > MAX_LINK_HOPS || link.startsWith('/')) return false;
      folder.pop();
      pending = [...link.split('/'), ...pending];
    }
  }
  return true;
}
