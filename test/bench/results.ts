/** The recorded benchmark runs (`docs/benchmarks.json`) and the page rendered from them. */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

import { format, resolveConfig } from 'prettier';

export interface BenchRecord {
  readonly startedAt: string;
  readonly seconds: number;
  readonly node: string;
  readonly cpus: number;
  readonly command: string;
  /** What the bench printed: its tables and notes, in markdown. */
  readonly markdown: string;
}

export interface BenchResults {
  readonly benches: Record<string, BenchRecord>;
}

/** `docs/benchmark-results.md`, rendered from the recorded runs alone (a test checks it is). */
export function renderResults(results: BenchResults): string {
  const sections = Object.entries(results.benches)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([name, run]) =>
      [
        `## ${name}`,
        '',
        `\`${run.command}\`, ${run.startedAt}, Node ${run.node}, ${run.cpus} CPUs, ${run.seconds} s.`,
        '',
        run.markdown.trim(),
        '',
      ].join('\n'),
    );
  return [
    '# Benchmark results',
    '',
    '<!-- Rendered by `npm run bench` from docs/benchmarks.json; do not edit by hand. -->',
    '',
    'What each benchmark measures and how to read it: [benchmarks.md](benchmarks.md).',
    '',
    ...sections,
  ].join('\n');
}

/** Where a run's figures go: `docs/` with `--record`, else a git-ignored folder of the checkout. */
export interface ResultFiles {
  readonly json: string;
  readonly md: string;
}

/**
 * The files a run writes under the checkout `root`. Only `--record` touches the tracked
 * `docs/benchmarks.json` and `docs/benchmark-results.md`; any other run writes the same two files
 * under `.cairn/bench/` (git-ignored), so trying a bench leaves the working tree clean.
 */
export function resultFiles(root: string, record: boolean): ResultFiles {
  const dir = record ? path.join(root, 'docs') : path.join(root, '.cairn', 'bench');
  return { json: path.join(dir, 'benchmarks.json'), md: path.join(dir, 'benchmark-results.md') };
}

function readResults(file: string): BenchResults {
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as BenchResults;
  } catch {
    return { benches: {} };
  }
}

/** `text` as the project's Prettier writes it, so the recorded files pass `prettier --check`. */
async function formatted(file: string, text: string): Promise<string> {
  return format(text, { ...(await resolveConfig(file)), filepath: file });
}

/** Replaces `name`'s entry in `files.json` (keeping the others') and renders `files.md` from it. */
export async function saveRun(files: ResultFiles, name: string, record: BenchRecord): Promise<void> {
  const results = readResults(files.json);
  results.benches[name] = record;
  mkdirSync(path.dirname(files.json), { recursive: true });
  writeFileSync(files.json, await formatted(files.json, JSON.stringify(results, null, 2)));
  writeFileSync(files.md, await formatted(files.md, renderResults(results)));
}
