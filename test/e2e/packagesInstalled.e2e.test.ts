import { execFile } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';

import { rolldown } from 'rolldown';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { apiKeysSetting, newTenant, type RunningApp, startApp, type TestTenant } from '../support/app';
import { azurite } from '../support/azurite';
import { tempDir } from '../support/cleanup';
import { memoryTableSettings, sessionIndexSettings } from '../support/tables';
import { scaled } from '../support/timeouts';

/**
 * The packages as their users get them: `npm pack` of every workspace, the tarballs installed with
 * npm into a fresh scratch folder (beside the frameworks the snippets use, at the versions this
 * repository locks), and four projects in it, one of each kind: TypeScript ES modules (`nodenext`),
 * TypeScript CommonJS, plain ES modules JavaScript, and TypeScript checked with `bundler` resolution
 * then bundled by rolldown. Each type-checks and runs the READMEs' snippets (marked
 * `<!-- snippet: name -->`) against a running service, each project as a tenant of its own.
 */

const run = promisify(execFile);
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';

const PACKAGES = [
  'shared/protocol',
  'client/client',
  'client/langgraph',
  'client/openai-agents',
  'client/cli',
] as const;

/** The snippets, by name, from the page that shows them. */
const SNIPPET_PAGES = {
  client: 'client/client/README.md',
  langgraph: 'client/langgraph/README.md',
  'openai-agents': 'client/openai-agents/README.md',
} as const;
type SnippetName = keyof typeof SNIPPET_PAGES;

/** What each snippet prints when it worked (its last line's comment, or the key it lists). */
const PRINTS: Record<SnippetName, string> = {
  client: 'notes/today',
  langgraph: 'visit 2, 3 messages',
  'openai-agents': 'I have seen 3 items',
};

/** The code block after `<!-- snippet: name -->` on a page. */
function snippet(page: string, name: string): string {
  const text = readFileSync(page, 'utf8');
  const match = new RegExp(`<!-- snippet: ${name} -->\\n+\`\`\`(\\w+)\\n([\\s\\S]*?)\`\`\``).exec(text);
  if (match === null) throw new Error(`${page} has no snippet ${name}`);
  return match[2] ?? '';
}

/** Versions this repository locks, for what the scratch project installs beside the packages. */
function locked(name: string): string {
  const lock = JSON.parse(readFileSync('package-lock.json', 'utf8')) as {
    packages: Record<string, { version?: string }>;
  };
  const version = lock.packages[`node_modules/${name}`]?.version;
  if (version === undefined) throw new Error(`package-lock.json locks no ${name}`);
  return version;
}

/** Bytes of files under `folder`. */
function folderBytes(folder: string): number {
  let total = 0;
  for (const entry of readdirSync(folder, { withFileTypes: true })) {
    const full = path.join(folder, entry.name);
    if (entry.isDirectory()) total += folderBytes(full);
    else if (entry.isFile()) total += statSync(full).size;
  }
  return total;
}

/** A package's own dependency closure inside `modules` (a node_modules folder), by name. */
function closure(modules: string, root: string, skip: ReadonlySet<string>): string[] {
  const seen = new Set<string>();
  const visit = (name: string) => {
    if (seen.has(name) || skip.has(name)) return;
    seen.add(name);
    const manifest = JSON.parse(readFileSync(path.join(modules, name, 'package.json'), 'utf8')) as {
      dependencies?: Record<string, string>;
    };
    for (const dependency of Object.keys(manifest.dependencies ?? {})) visit(dependency);
  };
  visit(root);
  return [...seen];
}

interface PackedFile {
  readonly path: string;
}
interface Packed {
  readonly name: string;
  readonly filename: string;
  readonly files: readonly PackedFile[];
}

/** The CommonJS form of a snippet: its imports on top, the rest in an async function. */
function asCommonJsMain(code: string): string {
  const imports = [...code.matchAll(/^import [\s\S]*?from '[^']+';\n/gm)].map((m) => m[0]);
  const body = imports.reduce((rest, line) => rest.replace(line, ''), code);
  return `${imports.join('')}\nasync function main() {\n${body}\n}\nvoid main().catch((error) => {\n  console.error(error);\n  process.exitCode = 1;\n});\n`;
}

interface ProjectKind {
  readonly name: string;
  readonly type: 'module' | 'commonjs';
  readonly tsconfig?: Record<string, unknown>;
  /** The file a snippet goes to, and what it becomes there. */
  readonly source: (name: SnippetName, code: string) => { file: string; code: string };
  /** After the type check: the file to run for a snippet. */
  readonly build: (project: string, name: SnippetName) => Promise<string>;
}

// Declarations are checked too (skipLibCheck off), the packages' and the frameworks': some of the
// frameworks' name web types (the Agents SDK's realtime transport, the MCP SDK's HeadersInit),
// hence the DOM library beside Node's.
const STRICT = {
  strict: true,
  target: 'es2022',
  lib: ['es2023', 'dom'],
  types: ['node'],
  skipLibCheck: false,
};

const KINDS: ProjectKind[] = [
  {
    name: 'ts-esm-nodenext',
    type: 'module',
    tsconfig: { ...STRICT, module: 'nodenext', moduleResolution: 'nodenext', outDir: 'out' },
    source: (name, code) => ({ file: `${name}.ts`, code }),
    build: (project, name) => Promise.resolve(path.join(project, 'out', `${name}.js`)),
  },
  {
    name: 'ts-commonjs',
    type: 'commonjs',
    // Not the frameworks' declarations: @langchain/core's, the MCP SDK's and the Agents SDK's name ES
    // modules from their CommonJS declarations, which a CommonJS project can only check with
    // skipLibCheck (as `tsc --init` sets it). The packages' own declarations are checked by the others.
    tsconfig: { ...STRICT, module: 'node16', moduleResolution: 'node16', outDir: 'out', skipLibCheck: true },
    source: (name, code) => ({ file: `${name}.ts`, code: asCommonJsMain(code) }),
    build: (project, name) => Promise.resolve(path.join(project, 'out', `${name}.js`)),
  },
  {
    name: 'js-esm',
    type: 'module',
    source: (name, code) => ({ file: `${name}.js`, code }),
    build: (project, name) => Promise.resolve(path.join(project, `${name}.js`)),
  },
  {
    name: 'ts-bundler',
    type: 'module',
    tsconfig: { ...STRICT, module: 'preserve', moduleResolution: 'bundler', noEmit: true },
    source: (name, code) => ({ file: `${name}.ts`, code }),
    build: async (project, name) => {
      const bundle = await rolldown({
        input: path.join(project, `${name}.ts`),
        platform: 'node',
        cwd: project,
      });
      // A folder, not a file: the frameworks' dynamic imports make chunks of their own.
      const dir = path.join(project, 'bundle', name);
      await bundle.write({ dir, format: 'esm', entryFileNames: '[name].mjs' });
      await bundle.close();
      return path.join(dir, `${name}.mjs`);
    },
  },
];

describe('the packages, packed and installed as users install them', () => {
  let scratch: string;
  let packed: Packed[];
  let app: RunningApp;
  const tenants = new Map<string, TestTenant>(KINDS.map((kind) => [kind.name, newTenant('pkg')]));

  beforeAll(async () => {
    scratch = tempDir('packages-');
    const tarballs = path.join(scratch, 'tarballs');
    mkdirSync(tarballs);
    const { stdout } = await run(npm, ['pack', '--workspaces', '--json', '--pack-destination', tarballs], {
      maxBuffer: 64 * 1024 * 1024,
    });
    packed = JSON.parse(stdout) as Packed[];

    const project = path.join(scratch, 'project');
    mkdirSync(project);
    const dependencies: Record<string, string> = Object.fromEntries(
      packed.map((pack) => [pack.name, `file:${path.join(tarballs, pack.filename)}`]),
    );
    for (const name of [
      '@langchain/langgraph',
      '@langchain/core',
      '@openai/agents',
      // The adapter's peer, at @openai/agents' own version (as its README says): one copy.
      '@openai/agents-core',
      // The version its ranges allow that runs on Node 20 (the newest needs Node 22).
      'openai',
      'typescript',
      '@types/node',
    ]) {
      dependencies[name] = locked(name);
    }
    writeFileSync(
      path.join(project, 'package.json'),
      JSON.stringify({ name: 'scratch', private: true, dependencies }, null, 2),
    );
    await run(npm, ['install', '--no-audit', '--no-fund', '--prefer-offline', '--loglevel=error'], {
      cwd: project,
      maxBuffer: 64 * 1024 * 1024,
    });

    const { tableEndpoint } = azurite();
    app = await startApp({
      CAIRN_API_KEYS: apiKeysSetting([...tenants.values()]),
      ...sessionIndexSettings(tableEndpoint),
      ...memoryTableSettings(tableEndpoint),
    });
  }, scaled(600_000));

  afterAll(async () => {
    await app?.stop();
  });

  it('packs every workspace with its README, built code and declarations of both kinds, nothing else', () => {
    expect(packed.map((pack) => pack.name).sort()).toEqual(
      PACKAGES.map(
        (folder) => (JSON.parse(readFileSync(`${folder}/package.json`, 'utf8')) as { name: string }).name,
      ).sort(),
    );
    for (const pack of packed) {
      const files = pack.files.map((file) => file.path);
      expect(files, pack.name).toContain('README.md');
      expect(files, pack.name).toContain('dist/esm/package.json');
      for (const kind of ['cjs', 'esm']) {
        expect(
          files.filter((file) => file.startsWith(`dist/${kind}/`) && file.endsWith('.d.ts')).length,
        ).toBeGreaterThan(0);
      }
      const extra = files.filter(
        (file) =>
          (/\.(map|ts)$/.test(file) && !file.endsWith('.d.ts')) || /test|tsbuildinfo|(^|\/)src\//.test(file),
      );
      expect(extra, pack.name).toEqual([]);
    }
  });

  it("keeps the client's installed tree under 1 MB (zod aside), with no Azure SDK and no server code", () => {
    const modules = path.join(scratch, 'project', 'node_modules');
    const tree = closure(modules, '@cairn-state/client', new Set(['zod']));
    expect(tree).toContain('@cairn-state/protocol');
    expect(tree.filter((name) => name.startsWith('@azure/') || name === 'durable-functions')).toEqual([]);
    const bytes = tree.reduce((sum, name) => sum + folderBytes(path.join(modules, name)), 0);
    expect(bytes).toBeLessThan(1024 * 1024);
    // The protocol holds no module of the service's domain, storage or triggers.
    const protocolFiles = readdirSync(path.join(modules, '@cairn-state', 'protocol', 'dist', 'cjs'), {
      recursive: true,
    }).map(String);
    expect(protocolFiles.filter((file) => /storage|services|functions|config/.test(file))).toEqual([]);
  });

  for (const kind of KINDS) {
    it(`type-checks and runs the snippets in a ${kind.name} project`, async () => {
      const project = path.join(scratch, 'project', kind.name);
      mkdirSync(project);
      writeFileSync(path.join(project, 'package.json'), JSON.stringify({ type: kind.type, private: true }));
      const names = Object.keys(SNIPPET_PAGES) as SnippetName[];
      const files = names.map((name) => {
        const made = kind.source(name, snippet(SNIPPET_PAGES[name], name));
        writeFileSync(path.join(project, made.file), made.code);
        return made.file;
      });
      if (kind.tsconfig !== undefined) {
        writeFileSync(
          path.join(project, 'tsconfig.json'),
          JSON.stringify({ compilerOptions: kind.tsconfig, files }, null, 2),
        );
        const tsc = path.join(scratch, 'project', 'node_modules', 'typescript', 'bin', 'tsc');
        await run(process.execPath, [tsc, '-p', project]).catch((error: Error & { stdout?: string }) => {
          throw new Error(`tsc in ${kind.name} failed:\n${error.stdout ?? error.message}`);
        });
      }
      const tenant = tenants.get(kind.name)!;
      const env = {
        PATH: process.env['PATH'] ?? '',
        HOME: scratch,
        CAIRN_URL: app.url,
        CAIRN_KEY: tenant.key,
      };
      for (const name of names) {
        const file = await kind.build(project, name);
        const { stdout } = await run(process.execPath, [file], { cwd: project, env });
        expect(stdout.trim().split('\n').at(-1), `${kind.name} ${name}`).toBe(PRINTS[name]);
      }
    });
  }

  it("runs the CLI's README line and `npx cairn --help` where the package is installed", async () => {
    const line = snippet('client/cli/README.md', 'cli').trim();
    expect(line).toBe('npx @cairn-state/cli --help');
    const project = path.join(scratch, 'project');
    const env = { ...process.env, npm_config_offline: 'true' };
    for (const args of [line.split(' ').slice(1), ['cairn', '--help']]) {
      const { stdout } = await run('npx', args, { cwd: project, env });
      expect(stdout, args.join(' ')).toContain('cairn checkpoint publish');
    }
  });
});
