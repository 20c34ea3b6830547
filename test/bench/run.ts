/**
 * `npm run bench -- <name>...`: runs the named benchmarks (all when none is named) and prints
 * their markdown tables. Each starts its own Azurite and apps; nothing else needs to run.
 */
import { cleanUp } from '../support/cleanup';
import { runArchiveBench } from './archive';
import { runCoordinationBench } from './coordination';
import { runKvBench } from './kv';
import { runMigrationBench } from './migration';

const benches: Record<string, (progress: (line: string) => void) => Promise<string>> = {
  archive: runArchiveBench,
  coordination: runCoordinationBench,
  kv: runKvBench,
  migration: runMigrationBench,
};

async function main(): Promise<void> {
  const names = process.argv.slice(2);
  for (const name of names.length === 0 ? Object.keys(benches) : names) {
    const bench = benches[name];
    if (bench === undefined)
      throw new Error(`unknown benchmark ${name}; known: ${Object.keys(benches).join(', ')}`);
    const started = Date.now();
    console.log(`## ${name} (node ${process.version}, ${new Date().toISOString()})\n`);
    console.log(await bench((line) => console.error(`  ${line}`)));
    console.log(`\n(${((Date.now() - started) / 1000).toFixed(0)} s)\n`);
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
