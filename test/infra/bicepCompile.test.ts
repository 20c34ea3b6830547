/**
 * The real Bicep compiler on infra/: `bicep build` and `bicep lint` on main.bicep (which pulls in
 * every module) must report no error and no warning, with the rules of infra/bicepconfig.json.
 * Scratch copies with one planted defect each show that the compile catches what the offline rules
 * cannot (undefined symbols, wrong enum values, names too long for Azure, wrong types, misspelt
 * properties, broken module wiring).
 *
 * The compiler comes from NuGet through the .NET SDK (bicepCli.ts). Without the SDK these tests
 * fail and say what to install; CAIRN_SKIP_BICEP_BUILD=1 skips them, and the runner's summary says
 * that it did.
 */
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { bicepPackageVersion, blocking, ensureBicep, REPOSITORY, runBicep, SKIP_VARIABLE } from './bicepCli';

const INFRA = path.join(REPOSITORY, 'infra');
const MAIN = path.join(INFRA, 'main.bicep');
const skip = process.env[SKIP_VARIABLE] === '1';

interface Planted {
  readonly name: string;
  /** File under infra/ that gets the defect. */
  readonly file: string;
  readonly from: string;
  readonly to: string;
  /** The diagnostic code the compiler or linter must report for it. */
  readonly code: string;
}

const PLANTED: readonly Planted[] = [
  {
    name: 'an undefined symbol',
    file: 'main.bicep',
    from: "name: 'st${resourceToken}'",
    to: "name: 'st${resourceTokn}'",
    code: 'BCP057',
  },
  {
    name: 'a bad enum value of a resource property',
    file: 'core/storage/storage-account.bicep',
    from: "accessTier: 'Hot'",
    to: "accessTier: 'Warm'",
    code: 'BCP036',
  },
  {
    name: "a value outside a parameter's allowed list",
    file: 'main.bicep',
    from: "param logLevel string = 'info'",
    to: "param logLevel string = 'verbose'",
    code: 'BCP033',
  },
  {
    name: 'a 25-character storage account name',
    file: 'main.bicep',
    from: "name: 'st${resourceToken}'",
    // 25 characters: one more than Azure allows (the module's @maxLength(24) says so).
    to: "name: 'stcairn0123456789abcdefgh'",
    code: 'BCP332',
  },
  {
    name: 'a string given to an int parameter',
    file: 'main.bicep',
    from: '    maxValueBytes: maxValueBytes\n',
    to: "    maxValueBytes: '2097152'\n",
    code: 'BCP036',
  },
  {
    name: 'a misspelt property',
    file: 'app/api.bicep',
    from: '    httpsOnly: true\n',
    to: '    httpsOnyl: true\n',
    code: 'BCP089',
  },
  {
    name: 'a module missing a required parameter',
    file: 'main.bicep',
    from: '    dataStorageAccountName: dataStorage.outputs.name\n    keyVaultName: keyVault.outputs.name\n    identityId',
    to: '    dataStorageAccountName: dataStorage.outputs.name\n    identityId',
    code: 'BCP035',
  },
  {
    name: 'a module given a parameter it does not declare',
    file: 'main.bicep',
    from: "    serviceName: 'api'\n",
    to: "    serviceNames: 'api'\n",
    code: 'BCP089',
  },
  {
    name: 'a read of an output the module does not declare',
    file: 'main.bicep',
    from: 'api.outputs.uri',
    to: 'api.outputs.url',
    code: 'BCP083',
  },
  {
    name: 'a module path that does not exist',
    file: 'main.bicep',
    from: "module plan 'core/host/flex-consumption-plan.bicep'",
    to: "module plan 'core/host/plan.bicep'",
    code: 'BCP091',
  },
  {
    name: 'a parameter nobody uses (a linter rule)',
    file: 'main.bicep',
    from: 'param environmentName string\n',
    to: "param environmentName string\n\n@description('Optional. Not used anywhere.')\nparam unusedSetting string = ''\n",
    code: 'no-unused-params',
  },
];

/** Copies infra/ (templates and bicepconfig.json) into `folder` and plants one defect. */
function plant(folder: string, { file, from, to }: Planted): void {
  cpSync(INFRA, folder, {
    recursive: true,
    filter: (source) => !source.startsWith(path.join(INFRA, 'tools')) && !source.endsWith('.md'),
  });
  const target = path.join(folder, file);
  const text = readFileSync(target, 'utf8');
  const at = text.indexOf(from);
  if (at === -1 || text.indexOf(from, at + 1) !== -1) {
    throw new Error(`${JSON.stringify(from)} must occur exactly once in ${file}`);
  }
  writeFileSync(target, text.slice(0, at) + to + text.slice(at + from.length));
}

describe.skipIf(skip)('the Bicep compiler', () => {
  let bicep: string;
  let scratch: string | undefined;

  beforeAll(() => {
    bicep = ensureBicep();
  }, 600_000);

  afterAll(() => {
    if (scratch !== undefined) rmSync(scratch, { recursive: true, force: true });
  });

  it('is the pinned version of the NuGet package', () => {
    const version = bicepPackageVersion();
    expect(version).toMatch(/^0\.49\.\d+$/);
    expect(runBicep(bicep, ['--version']).stdout).toContain(`Bicep CLI version ${version} `);
  });

  it('builds infra/main.bicep with no error and no warning, into the deployment it describes', () => {
    const build = runBicep(bicep, ['build', MAIN, '--stdout']);
    expect(blocking(build.diagnostics, REPOSITORY)).toEqual([]);
    expect(build.status).toBe(0);
    const template = JSON.parse(build.stdout) as {
      $schema: string;
      resources: Record<string, { type: string }> | { name: string; type: string }[];
    };
    expect(template.$schema).toContain('subscriptionDeploymentTemplate.json');
    // Modules compile to nested deployments: every one of them made it into the template.
    const resources = Array.isArray(template.resources)
      ? template.resources
      : Object.values(template.resources);
    const deployments = resources
      .filter((resource) => resource.type === 'Microsoft.Resources/deployments')
      .map((resource) => ('name' in resource ? String(resource.name) : '?'))
      .sort();
    expect(deployments).toEqual([
      'api',
      'dataStorage',
      'hostStorage',
      'identity',
      'keyVault',
      'monitoring',
      'plan',
      'rbac',
    ]);
  });

  it('lints infra/main.bicep and every module with no error and no warning', () => {
    const lint = runBicep(bicep, ['lint', MAIN]);
    expect(blocking(lint.diagnostics, REPOSITORY)).toEqual([]);
    expect(lint.status).toBe(0);
  });

  it('fails on each defect planted in a scratch copy, reporting it in the file it was planted in', () => {
    scratch = mkdtempSync(path.join(os.tmpdir(), 'cairn-bicep-'));
    const folders = PLANTED.map((planted, index) => {
      const folder = path.join(scratch ?? '', `case${index}`);
      plant(folder, planted);
      return folder;
    });
    // One compiler process for every copy: each start of the compiler costs seconds on this machine.
    const build = runBicep(bicep, ['build', '--pattern', path.join(scratch, 'case*', 'main.bicep')]);
    expect(build.status).not.toBe(0);
    // Each copy fails with the diagnostic its defect causes, reported in the file it was planted in.
    const found = PLANTED.map((planted, index) => {
      const file = path.join(folders[index] ?? '', planted.file);
      const own = build.diagnostics.filter(
        (diagnostic) => diagnostic.file === file && diagnostic.level !== 'Info',
      );
      const codes = new Set(own.map((diagnostic) => diagnostic.code));
      return { name: planted.name, reported: codes.has(planted.code), codes: [...codes] };
    });
    expect(found.filter((result) => !result.reported)).toEqual([]);
  });

  it('fails the lint step too on a copy that only the linter faults', () => {
    const unused = PLANTED.findIndex((planted) => planted.code === 'no-unused-params');
    const folder = path.join(scratch ?? os.tmpdir(), `case${unused}`);
    const lint = runBicep(bicep, ['lint', path.join(folder, 'main.bicep')]);
    expect(blocking(lint.diagnostics, folder)).toEqual([
      expect.stringMatching(/^main\.bicep\(\d+,\d+\) : Warning no-unused-params: Parameter "unusedSetting"/),
    ]);
  });
});

describe.skipIf(skip)('restoring the Bicep compiler', () => {
  it('restores nothing when the cache has it: a second run needs no dotnet at all', () => {
    ensureBicep();
    // PATH without dotnet: only a cache hit can succeed.
    expect(ensureBicep({ env: { ...process.env, PATH: '/nonexistent' } })).toMatch(/tools\/bicep$/);
  });

  it('fails naming what to install when the cache is empty and dotnet is missing', () => {
    const emptyCache = mkdtempSync(path.join(os.tmpdir(), 'cairn-bicep-cache-'));
    try {
      expect(() => ensureBicep({ cache: emptyCache, env: { ...process.env, PATH: '/nonexistent' } })).toThrow(
        /The \.NET SDK \(the `dotnet` command, version 8 or later\) is not on PATH.*CAIRN_SKIP_BICEP_BUILD=1/s,
      );
    } finally {
      rmSync(emptyCache, { recursive: true, force: true });
    }
  });
});
