import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

import { format, resolveConfig } from 'prettier';
import { describe, expect, it } from 'vitest';

import { type BenchResults, renderResults } from '../bench/results';

/** The documentation holds together: short README, live links, no pointer outside the repository. */

const DOCS = readdirSync('docs')
  .filter((name) => name.endsWith('.md'))
  .map((name) => `docs/${name}`);
const PAGES = ['README.md', 'infra/README.md', ...DOCS];

function relativeLinks(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  return [...text.matchAll(/\]\(([^)\s]+)\)/g)]
    .map((match) => match[1] ?? '')
    .filter((target) => !/^[a-z]+:/i.test(target) && !target.startsWith('#'));
}

describe('documentation', () => {
  it('keeps the README under 200 lines', () => {
    expect(readFileSync('README.md', 'utf8').split('\n').length).toBeLessThanOrEqual(200);
  });

  it.each(PAGES)('%s links only to files that exist', (page) => {
    for (const target of relativeLinks(page)) {
      const file = path.join(path.dirname(page), target.split('#')[0] ?? '');
      expect(existsSync(file), `${page} → ${target}`).toBe(true);
    }
  });

  it('lists every page of docs/ in the README (the rendered results from benchmarks.md)', () => {
    const readme = relativeLinks('README.md');
    for (const page of DOCS.filter((doc) => doc !== 'docs/benchmark-results.md')) {
      expect(readme, page).toContain(page);
    }
    expect(relativeLinks('docs/benchmarks.md')).toContain('benchmark-results.md');
  });

  it('points nowhere outside the repository and names none of the systems Cairn re-implements', () => {
    const sources = ['functions', 'shared', 'dev', 'client', 'docs', 'infra']
      .flatMap((folder) =>
        readdirSync(folder, { recursive: true, encoding: 'utf8' }).map((f) => `${folder}/${f}`),
      )
      .filter((file) => /\.(ts|mjs|md|bicep|json)$/.test(file));
    for (const file of [...sources, 'README.md']) {
      const text = readFileSync(file, 'utf8');
      // `seed` as a property (`.seed`, `seed:`) is LangGraph's DeltaChannel history field, not the word.
      expect(text, file).not.toMatch(
        /\bAPI\.md|DESIGN\.md|STYLE\.md|TOOLCHAIN\.md|[Ee]ntrabot|[Cc]riogen|[Mm]nemo|(?<![.\w])seed\b(?!\??:)|seeds\//,
      );
    }
  });

  it('links to no page outside the repository (addresses in examples are code, not links)', () => {
    for (const page of PAGES) {
      expect(readFileSync(page, 'utf8'), page).not.toMatch(/\]\(https?:/);
    }
  });

  it('renders docs/benchmark-results.md from docs/benchmarks.json alone', async () => {
    const results = JSON.parse(readFileSync('docs/benchmarks.json', 'utf8')) as BenchResults;
    const file = 'docs/benchmark-results.md';
    const expected = await format(renderResults(results), { ...(await resolveConfig(file)), filepath: file });
    expect(readFileSync(file, 'utf8')).toBe(expected);
  });
});
