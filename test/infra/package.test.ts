/**
 * What would be deployed: runs `npm run package`'s script into a temporary folder and lists it. The
 * package must hold the app and its production dependencies and nothing else (no tests, benchmarks,
 * development host, CLI or development dependency), and the app in it must load from it alone.
 * azure.yaml and .funcignore are checked against the same listing.
 */
import { spawnSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { REPOSITORY } from './bicepCli';

const SCRIPT = path.join(REPOSITORY, 'infra', 'package', 'makePackage.mjs');

interface Manifest {
  name?: string;
  version?: string;
  main?: string;
  imports?: Record<string, string>;
  engines?: Record<string, string>;
  scripts?: Record<string, string>;
  dependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
}

interface Lock {
  packages: Record<string, { version?: string; dev?: boolean; optional?: boolean; devOptional?: boolean }>;
}

function readJson<T>(file: string): T {
  return JSON.parse(readFileSync(file, 'utf8')) as T;
}

/** Every file under `folder`, as `/`-separated paths relative to it. */
function filesUnder(folder: string): string[] {
  return readdirSync(folder, { recursive: true, encoding: 'utf8' })
    .filter((entry) => statSync(path.join(folder, entry)).isFile())
    .map((entry) => entry.split(path.sep).join('/'))
    .sort();
}

/** The name of every package installed under node_modules, at any depth (once per copy). */
function installedPackages(modules: string): string[] {
  const names: string[] = [];
  const visit = (folder: string) => {
    if (!existsSync(folder)) return;
    for (const entry of readdirSync(folder)) {
      if (entry.startsWith('.')) continue;
      const candidates = entry.startsWith('@')
        ? readdirSync(path.join(folder, entry)).map((name) => path.join(folder, entry, name))
        : [path.join(folder, entry)];
      for (const candidate of candidates) {
        const manifest = path.join(candidate, 'package.json');
        if (existsSync(manifest)) names.push(readJson<Manifest>(manifest).name ?? '');
        visit(path.join(candidate, 'node_modules'));
      }
    }
  };
  visit(modules);
  return names;
}

const project = readJson<Manifest>(path.join(REPOSITORY, 'package.json'));

describe('the deployment package (npm run package)', () => {
  let scratch: string;
  let pkg: string;

  beforeAll(() => {
    scratch = mkdtempSync(path.join(os.tmpdir(), 'cairn-package-test-'));
    pkg = path.join(scratch, 'package');
    const made = spawnSync(process.execPath, [SCRIPT, pkg], {
      cwd: REPOSITORY,
      encoding: 'utf8',
      timeout: 600_000,
    });
    if (made.status !== 0) {
      throw new Error(`the package script failed (${String(made.status)}):\n${made.stdout}${made.stderr}`);
    }
  }, 600_000);

  afterAll(() => {
    rmSync(scratch, { recursive: true, force: true });
  });

  it('holds only dist/functions, dist/shared, host.json, package.json, the lock file and node_modules', () => {
    expect(readdirSync(pkg).sort()).toEqual([
      'dist',
      'host.json',
      'node_modules',
      'package-lock.json',
      'package.json',
    ]);
    expect(readdirSync(path.join(pkg, 'dist')).sort()).toEqual(['functions', 'shared']);
    expect(readFileSync(path.join(pkg, 'host.json'), 'utf8')).toBe(
      readFileSync(path.join(REPOSITORY, 'host.json'), 'utf8'),
    );
  });

  it('holds the compiled app and no test, benchmark, development host or CLI code', () => {
    // What the sources say the app is: every module of functions/ and shared/ except the
    // development host and the CLI (shared/runtime, shared/cli, shared/client; top-level dev/ and
    // client/ in the newer layout are outside functions/ and shared/ anyway).
    const development = /^shared\/(?:runtime|cli|client)\//;
    const expected = ['functions', 'shared']
      .flatMap((folder) => filesUnder(path.join(REPOSITORY, folder)).map((file) => `${folder}/${file}`))
      .filter((file) => file.endsWith('.ts') && !file.endsWith('.d.ts') && !development.test(file))
      .map((file) => `${file.replace(/\.ts$/, '.js')}`)
      .sort();
    const packaged = filesUnder(path.join(pkg, 'dist'));
    expect(packaged).toEqual(expected);
    expect(packaged).toContain('functions/index.js');
    expect(packaged.filter((file) => /(?:^|\/)(?:test|bench|runtime|cli|client|dev)\//.test(file))).toEqual(
      [],
    );
    // The development host and the CLI exist in the project: the package left them out.
    const developmentSources = ['shared', 'dev', 'client'].flatMap((folder) =>
      existsSync(path.join(REPOSITORY, folder))
        ? filesUnder(path.join(REPOSITORY, folder)).filter(
            (file) => folder !== 'shared' || development.test(`shared/${file}`),
          )
        : [],
    );
    expect(developmentSources.length).toBeGreaterThan(0);
  });

  it('has a production package.json: the same main, imports, engines and dependencies, no scripts or development tools', () => {
    const manifest = readJson<Manifest>(path.join(pkg, 'package.json'));
    expect(manifest.main).toBe(project.main);
    expect(manifest.imports).toEqual(project.imports);
    expect(manifest.engines).toEqual(project.engines);
    expect(manifest.dependencies).toEqual(project.dependencies);
    expect(manifest.scripts).toBeUndefined();
    expect(manifest.devDependencies).toBeUndefined();
    expect(manifest.optionalDependencies).toBeUndefined();
    expect(Object.keys(manifest).sort()).toEqual(
      [
        'name',
        'version',
        'private',
        'description',
        'license',
        'main',
        'imports',
        'engines',
        'dependencies',
      ].sort(),
    );
  });

  it('installs every production dependency, at its locked version, and no development dependency', () => {
    const copies = installedPackages(path.join(pkg, 'node_modules'));
    const installed = new Set(copies);
    for (const name of Object.keys(project.dependencies ?? {})) expect(installed, name).toContain(name);
    // A development dependency that a production one also needs (ajv, of the MCP SDK) is not
    // development-only: the lock says which are (`dev`).
    const projectLock = readJson<Lock>(path.join(REPOSITORY, 'package-lock.json')).packages;
    const development = [
      ...Object.keys(project.devDependencies ?? {}).filter(
        (name) => projectLock[`node_modules/${name}`]?.dev === true,
      ),
      ...Object.keys(project.optionalDependencies ?? {}),
    ];
    expect(development.length).toBeGreaterThan(0);
    expect(development.filter((name) => installed.has(name))).toEqual([]);
    // The packaged lock is the project's lock cut down to production: same versions, nothing that
    // only development needs.
    const packagedLock = readJson<Lock>(path.join(pkg, 'package-lock.json')).packages;
    const entries = Object.entries(packagedLock).filter(([key]) => key !== '');
    expect(entries.length).toBe(copies.length);
    expect(
      entries.filter(([key, entry]) => projectLock[key]?.version !== entry.version).map(([key]) => key),
    ).toEqual([]);
    expect(entries.filter(([key]) => projectLock[key]?.dev === true).map(([key]) => key)).toEqual([]);
  });

  it('carries no native addon, so a package built on any machine runs on the Linux host', () => {
    expect(filesUnder(path.join(pkg, 'node_modules')).filter((file) => file.endsWith('.node'))).toEqual([]);
  });

  it('loads from itself: every module is there, and only missing configuration stops it', () => {
    const load = (env: Record<string, string>) =>
      spawnSync(process.execPath, ['-e', "require('./dist/functions/index.js')"], {
        cwd: pkg,
        encoding: 'utf8',
        timeout: 60_000,
        // Only what a bare host has: no CAIRN_* settings, no NODE_PATH into the project.
        env: { PATH: process.env.PATH ?? '', ...env },
      });
    const bare = load({});
    expect(bare.stderr).not.toMatch(/Cannot find module|MODULE_NOT_FOUND/);
    expect(bare.stderr).toMatch(/ConfigurationError: CAIRN_API_KEYS: no credential is configured/);
    expect(bare.status).not.toBe(0);

    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'cairn-package-data-'));
    try {
      const configured = load({ CAIRN_API_KEYS: `tenant-a:${'ab'.repeat(32)}`, CAIRN_DATA_DIR: dataDir });
      expect(configured.stderr).not.toMatch(/Error/);
      expect(configured.status).toBe(0);
      // Outside the Functions host, @azure/functions names each registration it skips: all of the
      // app's triggers were registered from the package.
      const registered = [...configured.stderr.matchAll(/register function "([^"]+)"/g)].map(
        (match) => match[1],
      );
      expect(registered).toEqual(
        expect.arrayContaining(['health', 'kv', 'emailWindowPoll', 'startMigration']),
      );
      expect(registered.length).toBeGreaterThanOrEqual(20);
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it('refuses to replace a folder that holds anything a package does not, and leaves it as it was', () => {
    const other = path.join(scratch, 'not-a-package');
    mkdirSync(other);
    writeFileSync(path.join(other, 'notes.txt'), 'keep me');
    const refused = spawnSync(process.execPath, [SCRIPT, other], { cwd: REPOSITORY, encoding: 'utf8' });
    expect(refused.status).not.toBe(0);
    expect(refused.stderr).toContain('it holds notes.txt, which no package holds');
    expect(readdirSync(other)).toEqual(['notes.txt']);
  });

  it('is what azure.yaml deploys, as built (no remote build), after azd runs npm run package', () => {
    const azure = readFileSync(path.join(REPOSITORY, 'azure.yaml'), 'utf8');
    expect(azure).toMatch(/^ {4}dist: dist\/deploy$/m);
    expect(azure).toMatch(/^ {4}remoteBuild: false$/m);
    expect(azure).toMatch(/^ {6}prepackage:\n(?: {8}.*\n)*? {8}run: npm run package$/m);
    expect(project.scripts?.package).toBe('node infra/package/makePackage.mjs');
    // The script's default folder is the one azure.yaml names.
    expect(readFileSync(SCRIPT, 'utf8')).toContain("path.join(repository, 'dist', 'deploy')");
  });

  it('agrees with .funcignore: a publish keeps every packaged file and node_modules, and leaves out development code', () => {
    // git's own matcher applies .funcignore (gitignore syntax), in an empty repository of its own.
    const matcher = mkdtempSync(path.join(os.tmpdir(), 'cairn-funcignore-'));
    try {
      spawnSync('git', ['init', '--quiet', matcher], { encoding: 'utf8' });
      const ignored = (paths: readonly string[]) => {
        const check = spawnSync(
          'git',
          [
            '-c',
            `core.excludesFile=${path.join(REPOSITORY, '.funcignore')}`,
            'check-ignore',
            '--no-index',
            '--stdin',
          ],
          { cwd: matcher, input: paths.join('\n'), encoding: 'utf8' },
        );
        if (check.status !== 0 && check.status !== 1) throw new Error(check.stderr);
        return check.stdout.split('\n').filter(Boolean).sort();
      };
      const packaged = [
        'host.json',
        'package.json',
        'package-lock.json',
        'node_modules',
        'node_modules/@azure/functions/package.json',
        ...filesUnder(path.join(pkg, 'dist')).map((file) => `dist/${file}`),
      ];
      expect(ignored(packaged)).toEqual([]);
      const development = [
        'dist/test/runTests.js',
        'dist/test/bench/run.js',
        'dist/shared/runtime/start.js',
        'dist/shared/cli/main.js',
        'dist/shared/client/archiveClient.js',
        'dist/dev/start.js',
        'dist/client/cli.js',
        'dist/functions/index.js.map',
        'dist/deploy/package.json',
        'functions/index.ts',
        'shared/config.ts',
        'test/runTests.ts',
        'infra/main.bicep',
        'local.settings.json',
        '.git/HEAD',
      ];
      expect(ignored(development)).toEqual([...development].sort());
    } finally {
      rmSync(matcher, { recursive: true, force: true });
    }
  });
});
