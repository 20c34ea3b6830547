/**
 * `npm run bench -- [--record] [--quick] <name>...` (or `all`): runs the named benchmarks and
 * prints their markdown. Each run is written to `.cairn/bench/benchmarks.json` and
 * `benchmark-results.md` there (git-ignored; the path is printed); with `--record` to the tracked
 * `docs/benchmarks.json` instead, and `docs/benchmark-results.md` is then rendered from that file
 * alone, so every figure in the docs is one this code printed. A run of some benchmarks replaces
 * their entries and keeps the others'. `--quick` runs each with small counts, a smoke check whose
 * figures mean nothing, so it cannot be recorded. Each bench starts its own Azurite and apps.
 */
import os from 'node:os';

import { cleanUp } from '../support/cleanup';
import { runArchiveBench } from './archive';
import { runCoordinationBench } from './coordination';
import { runCryptoBench } from './crypto';
import { runKvBench } from './kv';
import { runMcpBench } from './mcp';
import { runMemoryBench } from './memory';
import { runMigrationBench } from './migration';
import { QUICK } from './mode';
import { runPruneBench } from './prune';
import { type BenchRecord, resultFiles, saveRun } from './results';
import { runSnapshotsBench } from './snapshots';
import { runThreadsBench } from './threads';

/**
 * The benches whose counts `--quick` makes small (test/bench/mode.ts); `--quick all` runs these.
 * `mcp` has none yet.
 */
const QUICK_BENCHES = [
  'archive',
  'coordination',
  'crypto',
  'kv',
  'memory',
  'migration',
  'prune',
  'snapshots',
  'threads',
];

const benches: Record<string, (progress: (line: string) => void) => Promise<string>> = {
  archive: runArchiveBench,
  coordination: runCoordinationBench,
  crypto: runCryptoBench,
  kv: runKvBench,
  mcp: runMcpBench,
  memory: runMemoryBench,
  migration: runMigrationBench,
  prune: runPruneBench,
  snapshots: runSnapshotsBench,
  threads: runThreadsBench,
};

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const recording = args.includes('--record');
  const quick = QUICK;
  if (recording && quick) throw new Error('--quick figures are a smoke check and cannot be --record-ed');
  const asked = args.filter((arg) => arg !== '--record' && arg !== '--quick');
  const every = quick ? QUICK_BENCHES : Object.keys(benches);
  const names = asked.length === 0 || asked.includes('all') ? every : asked;
  const files = resultFiles(process.cwd(), recording);
  for (const name of names) {
    if (benches[name] === undefined) {
      throw new Error(`unknown benchmark ${name}; known: all, ${Object.keys(benches).join(', ')}`);
    }
    if (!every.includes(name)) {
      throw new Error(`${name} has no quick mode; --quick runs: ${QUICK_BENCHES.join(', ')}`);
    }
  }
  for (const name of names) {
    const bench = benches[name]!;
    const started = Date.now();
    const startedAt = new Date(started).toISOString();
    console.log(`## ${name} (node ${process.version}, ${startedAt})\n`);
    const markdown = await bench((line) => console.error(`  ${line}`));
    const record: BenchRecord = {
      startedAt,
      seconds: Math.round((Date.now() - started) / 1000),
      node: process.version,
      cpus: os.cpus().length,
      command: `npm run bench -- ${quick ? '--quick ' : ''}${name}`,
      markdown,
    };
    console.log(markdown);
    console.log(`\n(${record.seconds} s)\n`);
    // Written after each bench, so a later failure keeps the figures already measured.
    await saveRun(files, name, record);
    console.log(`Written to ${files.json} and ${files.md}\n`);
  }
}

// Whatever happens, stop every app and Azurite a bench started and remove its temporary folders.
void main()
  .then(
    () => 0,
    (error: unknown) => {
      console.error(error);
      return 1;
    },
  )
  .then(async (code) => {
    await cleanUp();
    process.exit(code);
  });
