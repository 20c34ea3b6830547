/** The recorded benchmark runs (`docs/benchmarks.json`) and the page rendered from them. */

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
