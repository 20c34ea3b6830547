/**
 * `npm run package [-- <folder>]`: makes the folder that azd deploys to the Function App (by default
 * dist/deploy, the `dist` of azure.yaml), holding only what runs on Azure:
 *
 *   dist/functions/   the triggers (package.json `main` is dist/functions/index.js)
 *   dist/shared/      the domain, without the development host and the CLI
 *   host.json
 *   package.json      production fields only: no scripts, no devDependencies, no optional tools
 *   package-lock.json the project's lock, pruned to the production dependencies
 *   node_modules/     those dependencies, exactly the locked versions
 *
 * The app is compiled afresh into a temporary folder, so nothing stale or half-written in the
 * working dist/ (tests, an earlier layout) can slip in. The dependencies are installed here, not by
 * a remote build on Azure: they are plain JavaScript (the package test checks that no native addon
 * is among them), so what the tests load is byte for byte what runs in Azure.
 *
 * Development code lives in shared/runtime, shared/cli and shared/client, or, in the newer layout,
 * in top-level dev/ and client/ folders. Only functions/ and shared/ are copied, minus those three
 * subfolders, so both layouts give the same package.
 */
import { spawnSync } from 'node:child_process';
import console from 'node:console';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import process from 'node:process';
import { fileURLToPath } from 'node:url';

const repository = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const target = path.resolve(process.argv[2] ?? path.join(repository, 'dist', 'deploy'));

/** Compiled folders that run on the Functions host. */
const APP_FOLDERS = ['functions', 'shared'];
/** Development host and command-line tool inside shared/ (before they move to dev/ and client/). */
const DEVELOPMENT_FOLDERS = ['runtime', 'cli', 'client'].map((folder) => path.join('shared', folder));
/** Everything the package holds at its top level, and nothing else. */
const PACKAGE_ENTRIES = new Set(['dist', 'host.json', 'package.json', 'package-lock.json', 'node_modules']);
/** The package.json fields that mean something on the host. */
const PRODUCTION_FIELDS = [
  'name',
  'version',
  'private',
  'description',
  'license',
  'type',
  'main',
  'imports',
  'engines',
];

/** The npm that runs this script (`npm run package`), else the one on PATH. */
const npm =
  process.env.npm_execpath !== undefined && /npm-cli\.js$/.test(process.env.npm_execpath)
    ? [process.execPath, process.env.npm_execpath]
    : ['npm'];

function run(command, args, options) {
  const result = spawnSync(command, args, { stdio: 'inherit', ...options });
  if (result.error !== undefined) throw result.error;
  if (result.status !== 0)
    throw new Error(`${command} ${args.join(' ')} failed with status ${result.status}`);
}

/** Only an empty folder or an earlier package may be replaced: the target is deleted first. */
function assertReplaceable(folder) {
  const relative = path.relative(folder, repository);
  if (relative === '' || !relative.startsWith('..')) {
    throw new Error(`refusing to write the package to ${folder}: it holds the repository`);
  }
  if (!existsSync(folder)) return;
  const strangers = readdirSync(folder).filter((entry) => !PACKAGE_ENTRIES.has(entry));
  if (strangers.length > 0) {
    throw new Error(
      `refusing to replace ${folder}: it holds ${strangers.join(', ')}, which no package holds`,
    );
  }
}

function productionManifest() {
  const manifest = JSON.parse(readFileSync(path.join(repository, 'package.json'), 'utf8'));
  const production = Object.fromEntries(
    PRODUCTION_FIELDS.filter((field) => manifest[field] !== undefined).map((field) => [
      field,
      manifest[field],
    ]),
  );
  return { ...production, dependencies: manifest.dependencies ?? {} };
}

assertReplaceable(target);
const staging = mkdtempSync(path.join(os.tmpdir(), 'cairn-package-'));
try {
  // A fresh compile of the app (the test files it includes are simply not copied).
  run(process.execPath, [
    path.join(repository, 'node_modules', 'typescript', 'bin', 'tsc'),
    '-p',
    path.join(repository, 'tsconfig.json'),
    '--outDir',
    staging,
    '--sourceMap',
    'false',
  ]);

  rmSync(target, { recursive: true, force: true });
  mkdirSync(path.join(target, 'dist'), { recursive: true });
  for (const folder of APP_FOLDERS) {
    cpSync(path.join(staging, folder), path.join(target, 'dist', folder), {
      recursive: true,
      filter: (source) => {
        const relative = path.relative(staging, source);
        return !DEVELOPMENT_FOLDERS.some(
          (excluded) => relative === excluded || relative.startsWith(`${excluded}${path.sep}`),
        );
      },
    });
  }
  cpSync(path.join(repository, 'host.json'), path.join(target, 'host.json'));
  writeFileSync(path.join(target, 'package.json'), `${JSON.stringify(productionManifest(), null, 2)}\n`);
  cpSync(path.join(repository, 'package-lock.json'), path.join(target, 'package-lock.json'));

  // With the development entries gone from package.json, npm prunes the lock to the production
  // tree (keeping every locked version) and installs exactly that. No install scripts run: none of
  // the production dependencies has one that Cairn needs.
  const [npmCommand, ...npmArgs] = npm;
  run(
    npmCommand,
    [...npmArgs, 'install', '--omit=dev', '--ignore-scripts', '--no-audit', '--no-fund', '--prefer-offline'],
    { cwd: target, env: { ...process.env, NODE_ENV: 'production' } },
  );
  // Fails on a missing or mismatched dependency, before anything is deployed.
  run(npmCommand, [...npmArgs, 'ls', '--omit=dev', '--all'], { cwd: target, stdio: 'ignore' });
} finally {
  rmSync(staging, { recursive: true, force: true });
}
const shown = path.relative(process.cwd(), target);
console.log(`The deployment package is in ${shown.startsWith('..') ? target : shown}`);
