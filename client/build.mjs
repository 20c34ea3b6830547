/**
 * Builds the npm packages (`npm run build` and `npm ci` run it first), each with an ES module and a
 * CommonJS entry and declarations of each kind, so that `import` and `require` each get code and
 * types of their own kind:
 *
 * - The protocol and the client are built once, as CommonJS (their tsconfig.json, into dist/cjs),
 *   and get ES module wrappers in dist/esm (`export * from '../cjs/….js'`, for every module, its
 *   declarations the same): Node's ES module wrapper for a dual package. One copy of their code
 *   runs whichever way a project loads them, so an error class is the same class for `import` and
 *   `require` (`instanceof CairnHttpError` holds in a project that mixes both), and the packages
 *   ship their code once (the client's installed tree stays under its 1 MB budget).
 * - The adapters and the CLI are built twice, as CommonJS and as ES modules (tsconfig.esm.json,
 *   into dist/esm): a project on `module: nodenext` sees their ES declarations, and through them
 *   the ES types of its own peers (e.g. @langchain/core), so `builder.compile({ checkpointer })`
 *   type-checks there as in a CommonJS project.
 *
 * dist/esm is marked by a package.json of `{"type":"module"}`. One `tsc -b` over
 * client/tsconfig.build.json, incremental (`.build/` in each package): an unchanged package is not
 * compiled again.
 */
import { spawnSync } from 'node:child_process';
import console from 'node:console';
import { mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import process from 'node:process';
import { fileURLToPath } from 'node:url';

const repository = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');

/** The packages, in dependency order, and the folder of each one's sources. */
export const PACKAGES = [
  { folder: 'shared/protocol', sources: '.', wrapped: true },
  { folder: 'client/client', sources: 'src', wrapped: true },
  { folder: 'client/langgraph', sources: 'src', wrapped: false },
  { folder: 'client/openai-agents', sources: 'src', wrapped: false },
  { folder: 'client/cli', sources: 'src', wrapped: false },
];

/** The modules under `folder` (relative paths without `.ts`), its tests and builds aside. */
function modules(folder) {
  return readdirSync(folder, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts'))
    .map((entry) => path.relative(folder, path.join(entry.parentPath, entry.name)).slice(0, -'.ts'.length))
    .filter((module) => !/^(dist|\.build|node_modules)(\/|$)/.test(module));
}

/** dist/esm of a wrapped package: a module and a declaration per module, each re-exporting dist/cjs. */
function writeWrappers({ folder, sources }) {
  const esm = path.join(repository, folder, 'dist', 'esm');
  rmSync(esm, { recursive: true, force: true });
  for (const module of modules(path.join(repository, folder, sources))) {
    const target = path.join(esm, module);
    const cjs = path.relative(path.dirname(target), path.join(repository, folder, 'dist', 'cjs', module));
    const line = `export * from '${cjs.split(path.sep).join('/')}.js';\n`;
    mkdirSync(path.dirname(target), { recursive: true });
    writeFileSync(`${target}.js`, line);
    writeFileSync(`${target}.d.ts`, line);
  }
}

// The wrappers first: the adapters' ES builds read the client's ES declarations.
for (const pkg of PACKAGES) if (pkg.wrapped) writeWrappers(pkg);
const build = spawnSync(
  process.execPath,
  [tsc, '-b', path.join(repository, 'client', 'tsconfig.build.json')],
  {
    stdio: 'inherit',
  },
);
if (build.status !== 0) {
  console.error('building the packages failed (the compiler errors are above)');
  process.exit(build.status ?? 1);
}
for (const { folder } of PACKAGES) {
  mkdirSync(path.join(repository, folder, 'dist', 'esm'), { recursive: true });
  writeFileSync(path.join(repository, folder, 'dist', 'esm', 'package.json'), '{ "type": "module" }\n');
}
