/**
 * The real Bicep compiler for the tests: the `bicep` executable of the NuGet package that
 * `infra/tools/bicep.csproj` names, restored with the .NET SDK into a git-ignored cache of the
 * repository. The first run restores it (a few seconds); later runs find it and restore nothing.
 */
import { spawnSync } from 'node:child_process';
import { accessSync, chmodSync, constants, existsSync, readFileSync } from 'node:fs';
import path from 'node:path';

export const REPOSITORY = path.resolve(import.meta.dirname, '../..');
export const BICEP_PROJECT = path.join(REPOSITORY, 'infra', 'tools', 'bicep.csproj');
/** Inside node_modules: ignored by git, ESLint and Prettier alike, and never deployed. */
export const DEFAULT_CACHE = path.join(REPOSITORY, 'node_modules', '.cache', 'cairn-bicep');

/** Set to 1 by people without the .NET SDK: the compile tests are skipped, and the runner says so. */
export const SKIP_VARIABLE = 'CAIRN_SKIP_BICEP_BUILD';

const PACKAGE = 'Azure.Bicep.CommandLine.linux-x64';

/** The exact package version the project file pins (`Version="[x.y.z]"`). */
export function bicepPackageVersion(projectFile = BICEP_PROJECT): string {
  const project = readFileSync(projectFile, 'utf8');
  const match = new RegExp(`Include="${PACKAGE.replace(/\./g, '\\.')}"\\s+Version="\\[([0-9.]+)\\]"`).exec(
    project,
  );
  if (match?.[1] === undefined) throw new Error(`${projectFile} pins no exact version of ${PACKAGE}`);
  return match[1];
}

function packageFolder(cache: string, version: string): string {
  return path.join(cache, 'packages', PACKAGE.toLowerCase(), version);
}

/** Whether NuGet finished extracting the package: it writes `.nupkg.metadata` last. */
function restored(cache: string, version: string): boolean {
  const folder = packageFolder(cache, version);
  return existsSync(path.join(folder, '.nupkg.metadata')) && existsSync(path.join(folder, 'tools', 'bicep'));
}

export interface EnsureOptions {
  readonly cache?: string;
  /** The environment `dotnet` runs in (PATH decides whether it is found). */
  readonly env?: NodeJS.ProcessEnv;
}

/**
 * The path of the `bicep` executable, restoring the package first when the cache lacks it. Throws
 * an error that says what to install when the platform or the .NET SDK cannot provide it.
 */
export function ensureBicep({ cache = DEFAULT_CACHE, env = process.env }: EnsureOptions = {}): string {
  const version = bicepPackageVersion();
  const executable = path.join(packageFolder(cache, version), 'tools', 'bicep');
  if (!restored(cache, version)) {
    if (process.platform !== 'linux' || process.arch !== 'x64') {
      throw new Error(
        `The Bicep compiler of ${path.relative(REPOSITORY, BICEP_PROJECT)} is the linux-x64 build; this is ` +
          `${process.platform}-${process.arch}. Run the tests on Linux x64 (as CI does), or set ` +
          `${SKIP_VARIABLE}=1 to skip the compile.`,
      );
    }
    const dotnetEnv = { ...env, DOTNET_CLI_TELEMETRY_OPTOUT: '1', DOTNET_NOLOGO: '1' };
    const probe = spawnSync('dotnet', ['--version'], { env: dotnetEnv, encoding: 'utf8' });
    if (probe.error !== undefined || probe.status !== 0) {
      throw new Error(
        'The .NET SDK (the `dotnet` command, version 8 or later) is not on PATH. It restores the Bicep ' +
          `compiler that npm test runs (${path.relative(REPOSITORY, BICEP_PROJECT)}). Install the .NET SDK, ` +
          `or set ${SKIP_VARIABLE}=1 to run the other tests without the compile.`,
      );
    }
    const restore = spawnSync(
      'dotnet',
      [
        'restore',
        BICEP_PROJECT,
        '--packages',
        path.join(cache, 'packages'),
        // The restore's own files go to the cache too, not next to the project file.
        `-p:BaseIntermediateOutputPath=${path.join(cache, 'obj')}${path.sep}`,
        '--nologo',
        '--verbosity',
        'quiet',
      ],
      { env: dotnetEnv, encoding: 'utf8', timeout: 300_000 },
    );
    if (restore.status !== 0 || !restored(cache, version)) {
      throw new Error(
        `dotnet restore of ${PACKAGE} ${version} failed (status ${String(restore.status)}):\n` +
          `${restore.stdout}${restore.stderr}${restore.error?.message ?? ''}`,
      );
    }
  }
  try {
    accessSync(executable, constants.X_OK);
  } catch {
    // NuGet extracts files without their execute bit.
    chmodSync(executable, 0o755);
  }
  return executable;
}

export interface Diagnostic {
  readonly file: string;
  readonly line: number;
  readonly column: number;
  readonly level: 'Error' | 'Warning' | 'Info';
  readonly code: string;
  readonly message: string;
}

const DIAGNOSTIC = /^(.+)\((\d+),(\d+)\) : (Error|Warning|Info) ([\w-]+): (.*)$/;

/** The diagnostics in the compiler's output (`file(line,col) : Level code: message`). */
export function parseDiagnostics(output: string): Diagnostic[] {
  return output.split('\n').flatMap((line): Diagnostic[] => {
    const match = DIAGNOSTIC.exec(line.trim());
    if (match === null) return [];
    const [, file = '', row = '0', column = '0', level, code = '', message = ''] = match;
    return [
      {
        file,
        line: Number(row),
        column: Number(column),
        level: level as Diagnostic['level'],
        code,
        message,
      },
    ];
  });
}

export interface BicepRun {
  readonly status: number | null;
  readonly stdout: string;
  readonly stderr: string;
  readonly diagnostics: Diagnostic[];
}

/**
 * Runs the compiler to its end (or kills it after the timeout, so no process outlives a test).
 * Diagnostics go to stderr; `build --stdout` writes the ARM JSON to stdout.
 */
export function runBicep(executable: string, args: readonly string[]): BicepRun {
  const run = spawnSync(executable, args, {
    encoding: 'utf8',
    timeout: 180_000,
    maxBuffer: 64 * 1024 * 1024,
    // The compiler needs no network: no registry modules, and nothing to report anywhere.
    env: { ...process.env, DOTNET_CLI_TELEMETRY_OPTOUT: '1' },
  });
  if (run.error !== undefined) throw run.error;
  return {
    status: run.status,
    stdout: run.stdout,
    stderr: run.stderr,
    diagnostics: parseDiagnostics(`${run.stdout}\n${run.stderr}`),
  };
}

/** Errors and warnings, as `file(line,col) : Level code: message` relative to `base`. */
export function blocking(diagnostics: readonly Diagnostic[], base: string): string[] {
  return diagnostics
    .filter((diagnostic) => diagnostic.level !== 'Info')
    .map(
      (diagnostic) =>
        `${path.relative(base, diagnostic.file)}(${diagnostic.line},${diagnostic.column}) : ` +
        `${diagnostic.level} ${diagnostic.code}: ${diagnostic.message}`,
    );
}
