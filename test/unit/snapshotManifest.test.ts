import { describe, expect, it } from 'vitest';

import { loadConfig, parseSnapshotKeys } from '../../shared/config';
import { canonicalJson } from '../../shared/protocol/canonicalJson';
import { ConfigurationError, InvalidArgumentError } from '../../shared/protocol/errors';
import {
  MANIFEST_VERSION,
  parseManifest,
  serializeManifest,
  type SnapshotManifest,
  staysInside,
} from '../../shared/protocol/snapshots/manifest';
import { newKeyPair, rawBase64 } from '../support/snapshotTestKit';

/** The manifest format: canonical bytes, path rules, symlinks that leave the workspace, settings. */

const HASH = 'a'.repeat(64);

function manifestOf(overrides: Partial<SnapshotManifest> = {}): SnapshotManifest {
  return {
    version: MANIFEST_VERSION,
    workspaceId: 'w1',
    createdAt: '2026-11-29T21:16:51.123Z',
    files: [{ path: 'a.txt', sha256: HASH, size: 3, mode: 0o644 }],
    symlinks: [],
    ...overrides,
  };
}

function refusal(bytes: Buffer, allowExternalSymlinks = false): InvalidArgumentError {
  try {
    parseManifest(bytes, { allowExternalSymlinks });
  } catch (error) {
    if (error instanceof InvalidArgumentError) return error;
    throw error;
  }
  throw new Error(`expected a refusal of ${bytes.toString()}`);
}

describe('snapshot manifest', () => {
  it('is canonical JSON: sorted keys at every level, no whitespace, entries in UTF-8 byte order', () => {
    const bytes = serializeManifest(
      manifestOf({
        files: [
          { path: 'é.txt', sha256: HASH, size: 1, mode: 0o600 },
          { path: 'b/c', sha256: HASH, size: 1, mode: 0o755 },
          { path: 'Z', sha256: HASH, size: 1, mode: 0o644 },
        ],
        symlinks: [
          { source: 'l2', target: 'b' },
          { source: 'l1', target: 'Z' },
        ],
      }),
    );
    expect(bytes.toString()).toBe(
      `{"createdAt":"2026-11-29T21:16:51.123Z","files":[{"mode":420,"path":"Z","sha256":"${HASH}","size":1},{"mode":493,"path":"b/c","sha256":"${HASH}","size":1},{"mode":384,"path":"é.txt","sha256":"${HASH}","size":1}],"symlinks":[{"source":"l1","target":"Z"},{"source":"l2","target":"b"}],"version":1,"workspaceId":"w1"}`,
    );
    expect(parseManifest(bytes).files.map((file) => file.path)).toEqual(['Z', 'b/c', 'é.txt']);
    expect(canonicalJson({ b: [{ d: 1, c: 'x' }], a: null })).toBe('{"a":null,"b":[{"c":"x","d":1}]}');
  });

  it('refuses bytes that parse but are not canonical, naming the problem', () => {
    const canonical = serializeManifest(manifestOf());
    const pretty = Buffer.from(JSON.stringify(JSON.parse(canonical.toString()), null, 2));
    expect(refusal(pretty).message).toMatch(/^manifest: must be canonical JSON/);
    const text = canonical.toString();
    const versionFirst = Buffer.from(`{"version":1,${text.slice(1).replace(',"version":1', '')}`);
    expect(refusal(versionFirst).message).toMatch(/^manifest: must be canonical JSON/);
    const twoFiles = manifestOf({
      files: [
        { path: 'b', sha256: HASH, size: 3, mode: 0 },
        { path: 'a', sha256: HASH, size: 3, mode: 0 },
      ],
    });
    const unsortedEntries = Buffer.from(canonicalJson(twoFiles));
    expect(refusal(unsortedEntries).message).toBe(
      'manifest.files.1.path: must come after the previous path (sorted by UTF-8 bytes)',
    );
    const twice = Buffer.from(canonicalJson(manifestOf({ files: [twoFiles.files[1]!, twoFiles.files[1]!] })));
    expect(refusal(twice).message).toBe('manifest.files.1.path: is listed twice');
    const float = Buffer.from(canonical.toString().replace('"size":3', '"size":3.0'));
    expect(refusal(float).message).toMatch(/canonical/);
  });

  it('checks the version before anything else of the content, and every field by name', () => {
    expect(refusal(Buffer.from('{"version":2,"files":7}')).message).toBe(
      'manifest.version: must be 1 (got 2)',
    );
    expect(refusal(Buffer.from('not json')).message).toBe('manifest: must be JSON');
    expect(refusal(Buffer.from([0xff, 0xfe])).message).toBe('manifest: must be UTF-8');
    const cases: [Partial<SnapshotManifest> | Record<string, unknown>, string][] = [
      [{ workspaceId: '..' }, 'manifest.workspaceId'],
      [{ createdAt: 'yesterday' }, 'manifest.createdAt'],
      [{ files: [{ path: 'a', sha256: 'ABC', size: 1, mode: 0 }] }, 'manifest.files.0.sha256'],
      [{ files: [{ path: 'a', sha256: HASH, size: -1, mode: 0 }] }, 'manifest.files.0.size'],
      [{ files: [{ path: 'a', sha256: HASH, size: 1, mode: 0o10000 }] }, 'manifest.files.0.mode'],
      [{ files: [{ path: 'a', sha256: HASH, size: 1, mode: 0, owner: 'x' }] }, 'manifest.files.0.owner'],
      [{ extra: true }, 'manifest.extra'],
    ];
    for (const [override, field] of cases) {
      const bytes = Buffer.from(canonicalJson({ ...manifestOf(), ...override }));
      expect(refusal(bytes).field, field).toBe(field);
    }
  });

  it.each([
    ['../x', 'must not have a "." or ".." segment'],
    ['a/../../x', 'must not have a "." or ".." segment'],
    ['./a', 'must not have a "." or ".." segment'],
    ['/etc/passwd', 'must be relative (no leading "/")'],
    ['a//b', 'must not have an empty segment or a trailing "/"'],
    ['a/', 'must not have an empty segment or a trailing "/"'],
    ['', 'must not be empty'],
    ['a\u0000b', 'must not contain control characters'],
    ['a\nb', 'must not contain control characters'],
    ['a\\b', 'must not contain a backslash (paths are POSIX)'],
    [`${'x'.repeat(256)}`, 'must not have a segment over 255 bytes'],
  ])('refuses the file path %j: %s', (path, message) => {
    const bytes = Buffer.from(
      canonicalJson(manifestOf({ files: [{ path, sha256: HASH, size: 1, mode: 0 }] })),
    );
    expect(refusal(bytes).message).toBe(`manifest.files.0.path: ${message}`);
    const link = Buffer.from(
      canonicalJson(manifestOf({ files: [], symlinks: [{ source: path, target: 'a' }] })),
    );
    expect(refusal(link).message).toBe(`manifest.symlinks.0.source: ${message}`);
  });

  it('refuses an entry below a file or a symlink, and a path that is both', () => {
    const belowLink = manifestOf({
      files: [{ path: 'd/x', sha256: HASH, size: 1, mode: 0 }],
      symlinks: [{ source: 'd', target: 'real' }],
    });
    expect(refusal(serializeManifest(belowLink)).message).toBe(
      'manifest.files.0.path: lies below d, which is a file or a symlink',
    );
    const belowFile = manifestOf({
      files: [
        { path: 'a', sha256: HASH, size: 1, mode: 0 },
        { path: 'a/b', sha256: HASH, size: 1, mode: 0 },
      ],
    });
    expect(refusal(serializeManifest(belowFile)).field).toBe('manifest.files.1.path');
    const both = manifestOf({ symlinks: [{ source: 'a.txt', target: 'b' }] });
    expect(refusal(serializeManifest(both)).message).toMatch(/is both a file and a symlink/);
  });

  it('refuses files of one SHA-256 with different sizes', () => {
    const bytes = serializeManifest(
      manifestOf({
        files: [
          { path: 'a', sha256: HASH, size: 1, mode: 0 },
          { path: 'b', sha256: HASH, size: 2, mode: 0 },
        ],
      }),
    );
    expect(refusal(bytes).field).toBe('manifest.files.1.size');
  });

  it('keeps symlinks inside the workspace unless external ones are allowed, following its own links', () => {
    const links = (symlinks: SnapshotManifest['symlinks']) => serializeManifest(manifestOf({ symlinks }));
    for (const target of ['a.txt', 'sub/../a.txt', '.', 'x/y/../..', 'missing/file']) {
      expect(parseManifest(links([{ source: 'l', target }])).symlinks).toHaveLength(1);
    }
    expect(parseManifest(links([{ source: 'd/e/l', target: '../../a.txt' }])).symlinks).toHaveLength(1);
    for (const [source, target] of [
      ['l', '/etc/passwd'],
      ['l', '..'],
      ['d/l', '../../a.txt'],
      ['l', 'x/../../y'],
    ] as const) {
      const bytes = links([{ source, target }]);
      expect(refusal(bytes).message, target).toMatch(/^manifest\.symlinks\.0\.target: leaves the workspace/);
      expect(parseManifest(bytes, { allowExternalSymlinks: true }).symlinks).toHaveLength(1);
    }
    // `b` is the root itself, so `b/..` is above it, although it reads as inside.
    const chain = links([
      { source: 'a', target: 'b/..' },
      { source: 'b', target: '.' },
    ]);
    expect(refusal(chain).field).toBe('manifest.symlinks.0.target');
    // A loop never resolves: it counts as leaving.
    expect(
      staysInside(
        'a',
        'b',
        new Map([
          ['a', 'b'],
          ['b', 'a'],
        ]),
      ),
    ).toBe(false);
    // A link through another link that stays inside is fine.
    expect(staysInside('l', 'd/x', new Map([['d', 'sub/deeper']]))).toBe(true);
  });
});

describe('CAIRN_SNAPSHOT_KEYS', () => {
  const API_KEYS = `dev:${'a'.repeat(64)}`;

  it('reads several keys per tenant, in canonical base64', () => {
    const one = rawBase64(newKeyPair().publicKey);
    const two = rawBase64(newKeyPair().publicKey);
    const keys = parseSnapshotKeys(
      `alpha:${one}, alpha:${two.replaceAll('+', '-').replaceAll('/', '_')},beta:${one}`,
    );
    expect(keys.get('alpha')).toEqual([one, two]);
    expect(keys.get('beta')).toEqual([one]);
    expect(loadConfig({ CAIRN_API_KEYS: API_KEYS }).snapshotKeys.size).toBe(0);
  });

  it.each([
    ['alpha', 'entry 1'],
    [`..:${'A'.repeat(43)}=`, 'entry 1: tenant'],
    ['alpha:c2hvcnQ=', 'entry 1: expected'],
    [`alpha:${'A'.repeat(43)}=:extra`, 'entry 1: expected'],
  ])('refuses %j, naming the setting', (value, message) => {
    let error: unknown;
    try {
      loadConfig({ CAIRN_API_KEYS: API_KEYS, CAIRN_SNAPSHOT_KEYS: value });
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(ConfigurationError);
    expect((error as ConfigurationError).setting).toBe('CAIRN_SNAPSHOT_KEYS');
    expect((error as Error).message).toContain(message);
  });
});
