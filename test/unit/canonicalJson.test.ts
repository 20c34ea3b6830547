import { randomBytes } from 'node:crypto';

import { describe, expect, it } from 'vitest';

import {
  manifestIdentity,
  serializeManifest as serializeArchiveManifest,
} from '../../shared/protocol/archive/manifest';
import { recordHash } from '../../shared/protocol/audit/chain';
import { canonicalJson } from '../../shared/protocol/canonicalJson';
import { serializeManifest, type SnapshotManifest } from '../../shared/protocol/snapshots/manifest';

/**
 * The walk every copy wrote by hand before the library took over (audit chain, snapshot manifest,
 * archive manifest identity, the OpenAI Agents session): kept here as the reference that stored
 * hashes, snapshot ids and signatures were computed with.
 */
function handWritten(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(handWritten).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, inner]) => inner !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([key, inner]) => `${JSON.stringify(key)}:${handWritten(inner)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

/** A seeded JSON value with awkward keys (astral, BMP above surrogates, case), numbers and strings. */
function jsonValue(next: () => number, depth: number): unknown {
  const keys = ['a', 'B', 'é', '\u20ac', '\ud83d\ude00', '\uff61', '', 'a b', '"q"', '10', '9', 'ß'];
  const numbers = [
    0,
    -0,
    1,
    -1,
    0.5,
    1e21,
    1e-7,
    123456789012345,
    2 ** 53 - 1,
    5e-324,
    1.7976931348623157e308,
  ];
  const strings = ['', 'x', 'line\nbreak', '\u0001\u001f', '\u2028\u2029', '\ud800', 'é\u0301', '/\\'];
  const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)] as T;
  const kind = depth <= 0 ? Math.floor(next() * 4) : Math.floor(next() * 6);
  if (kind === 0) return pick(numbers);
  if (kind === 1) return pick(strings);
  if (kind === 2) return pick([true, false, null]);
  if (kind === 3) return pick(strings) + String(Math.floor(next() * 1000));
  if (kind === 4) return Array.from({ length: Math.floor(next() * 4) }, () => jsonValue(next, depth - 1));
  return Object.fromEntries(
    Array.from({ length: Math.floor(next() * 5) }, () => [pick(keys), jsonValue(next, depth - 1)]),
  );
}

function seeded(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return state / 2 ** 32;
  };
}

describe('canonical JSON (the canonicalize library) against the hand-written walk it replaced', () => {
  it('is byte-identical for seeded JSON values of every kind', () => {
    const next = seeded(8785);
    for (let round = 0; round < 2000; round++) {
      const value = jsonValue(next, 4);
      // What is hashed is JSON: parsed from text, or built and then stored as JSON.
      const stored = JSON.parse(JSON.stringify(value)) as unknown;
      expect(canonicalJson(stored)).toBe(handWritten(stored));
      expect(canonicalJson(value)).toBe(handWritten(value));
    }
  });

  it('is byte-identical for the shapes stored: audit records, snapshot manifests, archive manifests', () => {
    const record = {
      seq: 7,
      atMs: 1764626400123,
      id: 'ev-1',
      tenant: 't\u00e9',
      action: 'kv.written',
      actor: { kind: 'key', name: 'dev' },
      subject: JSON.stringify(['a/b', '\ud83d\ude00']),
      outcome: 'ok',
      details: { count: null, bytes: 12, nested: { z: [1, 0.25], a: 'x' } },
      prevHash: '0'.repeat(64),
    };
    expect(canonicalJson(record)).toBe(handWritten(record));
    expect(recordHash(record as never)).toMatch(/^[0-9a-f]{64}$/);
    const hash = randomBytes(32).toString('hex');
    const manifest: SnapshotManifest = {
      version: 1,
      workspaceId: 'w1',
      createdAt: '2026-12-01T23:00:00.000Z',
      files: [
        { path: 'Z', sha256: hash, size: 1, mode: 420 },
        { path: '\u00e9/\ud83d\ude00.txt', sha256: hash, size: 2 ** 40, mode: 493 },
      ],
      symlinks: [{ source: 'l', target: 'Z' }],
    };
    const bytes = serializeManifest(manifest).toString('utf8');
    expect(bytes).toBe(handWritten(JSON.parse(bytes)));
    const request = {
      checkpointId: 'c1',
      parent: null,
      createdAt: '2026-12-01T23:00:00.000Z',
      files: [{ path: 'a/\u20ac', generation: 'g1', size: 5, sha256: hash.toUpperCase() }],
      data: { step: 3, '\ud83d\ude00': [true, null], '\uff61': 'x' },
    };
    const identity = manifestIdentity(request);
    expect(identity).toBe(
      handWritten({
        checkpointId: 'c1',
        parent: null,
        files: [{ path: 'a/\u20ac', generation: 'g1', size: 5, sha256: hash }],
        data: request.data,
      }),
    );
    expect(serializeArchiveManifest(request as never).length).toBeGreaterThan(0);
  });

  it('refuses what JSON cannot hold with a TypeError', () => {
    expect(() => canonicalJson({ n: Number.NaN })).toThrow(TypeError);
    expect(() => canonicalJson([Number.POSITIVE_INFINITY])).toThrow(TypeError);
    expect(() => canonicalJson(undefined)).toThrow(TypeError);
  });
});
