/**
 * The `start` script: `npm start` without waiting for a build it does not need.
 *
 * 1. When the app is built, checks PORT, the folder's lock and every setting with the built code
 *    (dist/dev/start.js `prepare`): a bad one is reported at once, before any build or Azurite.
 * 2. Builds only when a source is newer than the last build (dist/tsconfig.tsbuildinfo), and then
 *    incrementally (tsconfig.json has `incremental`): only what changed is compiled again.
 *    `npm ci` builds once (the `prepare` script), so the first start does not.
 * 3. Runs dist/dev/start.js `main`, fresh from the build.
 * Plain JavaScript, because it runs before anything is compiled.
 */
import { spawnSync } from 'node:child_process';
import console from 'node:console';
import { existsSync, readdirSync, statSync, utimesSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import process from 'node:process';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(import.meta.url);
const dist = path.join(root, 'dist');
const start = path.join(dist, 'dev', 'start.js');
const buildInfo = path.join(dist, 'tsconfig.tsbuildinfo');
/** What tsconfig.json compiles (its `include`), with the files that change how it compiles. */
const SOURCES = [
  'functions',
  'shared',
  'dev',
  'client',
  'test/runTests.ts',
  'test/bench',
  'test/fixtures',
  'test/docs',
];
const CONFIGS = ['tsconfig.json', 'package.json'];

/** The newest modification time (ms) of the sources, 0 for none. */
function newestSource() {
  let newest = 0;
  const visit = (file) => {
    let stat;
    try {
      stat = statSync(file);
    } catch {
      return;
    }
    if (stat.isDirectory()) {
      for (const entry of readdirSync(file)) visit(path.join(file, entry));
    } else if (file.endsWith('.ts')) {
      newest = Math.max(newest, stat.mtimeMs);
    }
  };
  for (const source of SOURCES) visit(path.join(root, source));
  for (const config of CONFIGS) newest = Math.max(newest, statSync(path.join(root, config)).mtimeMs);
  return newest;
}

function upToDate() {
  return existsSync(start) && existsSync(buildInfo) && statSync(buildInfo).mtimeMs >= newestSource();
}

function fail(message) {
  process.stderr.write(`Cairn cannot start: ${message}\n`);
  process.exit(1);
}

function build() {
  console.log('Building what changed (tsc -p tsconfig.json, incremental)...');
  const tsc = require.resolve('typescript/bin/tsc');
  const result = spawnSync(process.execPath, [tsc, '-p', path.join(root, 'tsconfig.json')], {
    cwd: root,
    stdio: ['ignore', 'pipe', 'pipe'],
    encoding: 'utf8',
  });
  if (result.status !== 0) {
    process.stderr.write(result.stdout + result.stderr);
    fail('the build failed (the compiler errors are above; npm run build shows them too)');
  }
  // A build that found nothing to compile leaves the file as it was: now it is up to date.
  const now = new Date();
  if (existsSync(buildInfo)) utimesSync(buildInfo, now, now);
}

function refuse(error) {
  const message = error instanceof Error ? error.message.split('\n')[0] : String(error);
  fail(message);
}

/** dist/dev/start.js, loaded again: a build replaced what an earlier load holds. */
function loadStart() {
  for (const file of Object.keys(require.cache))
    if (file.startsWith(dist + path.sep)) delete require.cache[file];
  return require(start);
}

let prepared;
if (existsSync(start)) {
  // Only a refusal ends here: the lock it took stays with this process.
  prepared = await require(start).prepare().catch(refuse);
}
if (!upToDate()) build();
const app = loadStart();
prepared ??= await app.prepare().catch(refuse);
await app.main(prepared).catch(refuse);
