/**
 * `npm run bench -- <name>...` (or `all`): runs the named benchmarks, prints their markdown, and
 * records each run in `docs/benchmarks.json`; `docs/benchmark-results.md` is then rendered from that
 * file alone, so every figure in the docs is one this code printed. A run of some benchmarks
 * replaces their entries and keeps the others'. Each bench starts its own Azurite and apps.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { format, resolveConfig } from 'prettier';

import { cleanUp } from '../support/cleanup';
import { runArchiveBench } from './archive';
import { runCoordinationBench } from './coordination';
import { runCryptoBench } from './crypto';
import { runKvBench } from './kv';
import { runMcpBench } from './mcp';
import { runMemoryBench } from './memory';
import { runMigrationBench } from './migration';
import { runPruneBench } from './prune';
import { type BenchRecord, type BenchResults, renderResults } from './results';
import { runSnapshotsBench } from './snapshots';
import { runThreadsBench } from './threads';

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

const RESULTS_JSON = path.resolve('docs/benchmarks.json');
const RESULTS_MD = path.resolve('docs/benchmark-results.md');

/** `text` as the project's Prettier writes it, so the recorded files pass `prettier --check`. */
async function formatted(file: string, text: string): Promise<string> {
  return format(text, { ...(await resolveConfig(file)), filepath: file });
}

function readResults(): BenchResults {
  try {
    return JSON.parse(readFileSync(RESULTS_JSON, 'utf8')) as BenchResults;
  } catch {
    return { benches: {} };
  }
}

async function main(): Promise<void> {
  const asked = process.argv.slice(2);
  const names = asked.length === 0 || asked.includes('all') ? Object.keys(benches) : asked;
  for (const name of names) {
    if (benches[name] === undefined) {
      throw new Error(`unknown benchmark ${name}; known: all, ${Object.keys(benches).join(', ')}`);
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
      command: `npm run bench -- ${name}`,
      markdown,
    };
    console.log(markdown);
    console.log(`\n(${record.seconds} s)\n`);
    // Written after each bench, so a later failure keeps the figures already measured.
    const results = readResults();
    results.benches[name] = record;
    writeFileSync(RESULTS_JSON, await formatted(RESULTS_JSON, JSON.stringify(results, null, 2)));
    writeFileSync(RESULTS_MD, await formatted(RESULTS_MD, renderResults(results)));
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
