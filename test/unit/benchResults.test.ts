import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

import { describe, expect, it } from 'vitest';

import { type BenchRecord, type BenchResults, renderResults, resultFiles, saveRun } from '../bench/results';
import { tempDir } from '../support/cleanup';

/** Where `npm run bench` writes a run: a git-ignored folder, or the tracked docs with `--record`. */

const RUN: BenchRecord = {
  startedAt: '2026-01-02T03:04:05.000Z',
  seconds: 7,
  node: 'v22.0.0',
  cpus: 2,
  command: 'npm run bench -- tiny',
  markdown: '| op | ops/s |\n| --- | --- |\n| get | 1 |\n',
};

/** A checkout with recorded results of its own, as the repository has. */
function checkout(): { root: string; json: string; md: string; before: { json: string; md: string } } {
  const root = tempDir('cairn-bench-results-');
  mkdirSync(path.join(root, 'docs'));
  const recorded: BenchResults = { benches: { old: { ...RUN, command: 'npm run bench -- old' } } };
  const json = path.join(root, 'docs', 'benchmarks.json');
  const md = path.join(root, 'docs', 'benchmark-results.md');
  const before = { json: JSON.stringify(recorded, null, 2) + '\n', md: renderResults(recorded) };
  writeFileSync(json, before.json);
  writeFileSync(md, before.md);
  return { root, json, md, before };
}

describe('benchmark results', () => {
  it('without --record leaves the tracked docs untouched and writes under .cairn/bench/', async () => {
    const repo = checkout();
    const files = resultFiles(repo.root, false);
    expect(path.relative(repo.root, files.json)).toBe(path.join('.cairn', 'bench', 'benchmarks.json'));
    expect(path.relative(repo.root, files.md)).toBe(path.join('.cairn', 'bench', 'benchmark-results.md'));

    await saveRun(files, 'tiny', RUN);

    expect(readFileSync(repo.json, 'utf8')).toBe(repo.before.json);
    expect(readFileSync(repo.md, 'utf8')).toBe(repo.before.md);
    const written = JSON.parse(readFileSync(files.json, 'utf8')) as BenchResults;
    expect(Object.keys(written.benches)).toEqual(['tiny']);
    expect(readFileSync(files.md, 'utf8')).toContain('`npm run bench -- tiny`');
  });

  it('with --record writes the tracked docs, keeping the other benches’ entries', async () => {
    const repo = checkout();
    const files = resultFiles(repo.root, true);
    expect(files).toEqual({ json: repo.json, md: repo.md });

    await saveRun(files, 'tiny', RUN);

    const written = JSON.parse(readFileSync(repo.json, 'utf8')) as BenchResults;
    expect(Object.keys(written.benches).sort()).toEqual(['old', 'tiny']);
    expect(written.benches['tiny']).toEqual(RUN);
    const page = readFileSync(repo.md, 'utf8');
    expect(page).toContain('## old');
    expect(page).toContain('## tiny');
  });

  it('ignores .cairn/, so what an unrecorded run writes is never tracked', () => {
    expect(readFileSync('.gitignore', 'utf8').split('\n')).toContain('.cairn/');
  });
});
