/**
 * Offline checks of infra/: the Bicep compiler cannot run here, so these tests parse every template
 * with the tree-sitter Bicep grammar and hold it to the project's rules (see bicepRules.ts for what
 * that can and cannot prove). Each rule is also run on a deliberately broken copy of a real
 * template, to show that it can fail.
 */
import { readdirSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { beforeAll, describe, expect, it } from 'vitest';
import type { Node } from 'web-tree-sitter';

import { loadConfig, type SettingDoc, type SettingName, SETTINGS } from '../../shared/config';
import {
  apiVersionViolations,
  type AppSetting,
  appSettingsResources,
  appSettingViolations,
  countResources,
  declaresParameter,
  moduleParameterValue,
  moduleWiringViolations,
  parameterDefault,
  parameterDescriptionViolations,
  parametersFileViolations,
  parseBicep,
  propertyLiterals,
  REQUIRED_SETTINGS,
  requiredSettingViolations,
  roleAssignmentNameViolations,
  secretViolations,
  stringLiteral,
  syntaxViolations,
  type Violation,
} from './bicepRules';

const INFRA = path.resolve(import.meta.dirname, '../../infra');

function bicepFilesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((file) => file.endsWith('.bicep'))
    .map((file) => file.split(path.sep).join('/'))
    .sort();
}

const FILES = bicepFilesUnder(INFRA);
const SOURCES = new Map(FILES.map((file) => [file, readFileSync(path.join(INFRA, file), 'utf8')]));
const PARAMETERS_JSON = readFileSync(path.join(INFRA, 'main.parameters.json'), 'utf8');
const roots = new Map<string, Node>();

function source(file: string): string {
  const text = SOURCES.get(file);
  if (text === undefined) throw new Error(`no template ${file}`);
  return text;
}

function root(file: string): Node {
  const node = roots.get(file);
  if (node === undefined) throw new Error(`${file} was not parsed`);
  return node;
}

beforeAll(async () => {
  for (const file of FILES) roots.set(file, await parseBicep(source(file)));
});

/** What the app requires in Azure, read from SETTINGS itself (never a copied list). */
const REQUIRED_IN_BLOB = (Object.entries(SETTINGS) as [SettingName, SettingDoc][])
  .filter(([, doc]) => doc.requiredIn === 'blob')
  .map(([name]) => name);
const APP_SETTING_RULES = {
  required: REQUIRED_IN_BLOB,
  // The account key is for Azurite only (Azure uses AZURE_CLIENT_ID); API keys are not used in Azure.
  forbidden: ['CAIRN_STORAGE_ACCOUNT_KEY', 'CAIRN_API_KEYS', 'CAIRN_KEEP_LOCAL', 'CAIRN_DATA_DIR'],
  known: Object.keys(SETTINGS),
};

function appSettings(): AppSetting[] {
  return appSettingsResources(root('app/api.bicep')).flat();
}

function setting(name: string): AppSetting {
  const found = appSettings().find((candidate) => candidate.name === name);
  if (found === undefined) throw new Error(`app setting ${name} is not set`);
  return found;
}

function wiring(file: string, node: Node): Violation[] {
  return moduleWiringViolations(node, path.posix.dirname(file), (target) =>
    roots.get(path.posix.normalize(target)),
  );
}

describe('infra templates', () => {
  it('include the files of the deployment (so that no rule below passes on an empty list)', () => {
    expect(FILES).toEqual(
      expect.arrayContaining([
        'app/api.bicep',
        'app/rbac.bicep',
        'core/host/flex-consumption-plan.bicep',
        'core/identity/user-assigned-identity.bicep',
        'core/monitor/monitoring.bicep',
        'core/storage/storage-account.bicep',
        'main.bicep',
      ]),
    );
  });

  const RULES: [string, (node: Node) => Violation[]][] = [
    ['parse with no ERROR or MISSING node', syntaxViolations],
    ['pin the API version of every resource', apiVersionViolations],
    ['describe every parameter as Required. or Optional.', parameterDescriptionViolations],
    ['hold no literal secret or connection string', secretViolations],
    ['harden every storage account and Application Insights component', requiredSettingViolations],
    ['name every role assignment with guid(scope.id, principal, role)', roleAssignmentNameViolations],
  ];

  it.each(RULES)('%s', (_name, rule) => {
    const violations = Object.fromEntries(
      FILES.map((file) => [file, rule(root(file))] as const).filter(([, found]) => found.length > 0),
    );
    expect(violations).toEqual({});
  });

  it('wire modules correctly: files exist, Required params given, no unknown params or outputs', () => {
    const violations = Object.fromEntries(
      FILES.map((file) => [file, wiring(file, root(file))] as const).filter(([, found]) => found.length > 0),
    );
    expect(violations).toEqual({});
    // main.bicep has modules, so the rule above had something to check.
    expect(source('main.bicep')).toMatch(/^module api 'app\/api\.bicep'/m);
  });

  it('match main.parameters.json: every Required param of main.bicep is given, and no unknown one', () => {
    expect(parametersFileViolations(root('main.bicep'), PARAMETERS_JSON)).toEqual([]);
  });

  it('declare the resources the hardening rule is about (so that it did not pass on nothing)', () => {
    for (const type of new Set(REQUIRED_SETTINGS.map((required) => required.type))) {
      expect(FILES.filter((file) => countResources(root(file), type) > 0)).toHaveLength(1);
    }
  });
});

describe('role assignments', () => {
  it('grant exactly the data Contributor roles and Monitoring Metrics Publisher (no Blob Data Owner)', () => {
    expect(propertyLiterals(root('app/rbac.bicep'), 'roleDefinitionId').sort()).toEqual(
      [
        'ba92f5b4-2d11-453d-a403-e96b0029c9fe', // Storage Blob Data Contributor
        '974c5e8b-45b9-4653-ba55-5f855dd0fb88', // Storage Queue Data Contributor
        '0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3', // Storage Table Data Contributor
        '3913510d-42f4-4e42-8a64-420c390055eb', // Monitoring Metrics Publisher
      ].sort(),
    );
  });

  it('go to the identity the Function App runs as', () => {
    const main = root('main.bicep');
    expect(moduleParameterValue(main, 'rbac', 'principalId')?.text).toBe('identity.outputs.principalId');
    expect(moduleParameterValue(main, 'api', 'identityId')?.text).toBe('identity.outputs.id');
    expect(moduleParameterValue(main, 'api', 'identityClientId')?.text).toBe('identity.outputs.clientId');
  });
});

describe('Function App settings', () => {
  it('are set by exactly one appsettings resource, in app/api.bicep', () => {
    const counts = Object.fromEntries(FILES.map((file) => [file, appSettingsResources(root(file)).length]));
    expect(counts).toEqual(Object.fromEntries(FILES.map((file) => [file, file === 'app/api.bicep' ? 1 : 0])));
  });

  it('include every setting SETTINGS requires for the blob backend, and no account key or API key', () => {
    // AZURE_CLIENT_ID stands for "CAIRN_STORAGE_ACCOUNT_KEY or AZURE_CLIENT_ID": Azure uses the identity.
    expect(REQUIRED_IN_BLOB).toEqual(expect.arrayContaining(['CAIRN_BLOB_ENDPOINT', 'CAIRN_BLOB_CONTAINER']));
    expect(REQUIRED_IN_BLOB).toContain('AZURE_CLIENT_ID');
    expect(appSettingViolations(appSettings(), APP_SETTING_RULES)).toEqual([]);
    expect(appSettings().map((s) => s.name)).not.toContain('CAIRN_STORAGE_ACCOUNT_KEY');
  });

  it('connect the host to storage with the managed identity, the same one Cairn and telemetry use', () => {
    const names = appSettings().map((s) => s.name);
    // A plain AzureWebJobsStorage would be a connection string; Flex refuses the worker settings.
    for (const absent of ['AzureWebJobsStorage', 'FUNCTIONS_WORKER_RUNTIME', 'FUNCTIONS_EXTENSION_VERSION']) {
      expect(names).not.toContain(absent);
    }
    expect(setting('AzureWebJobsStorage__credential').literal).toBe('managedidentity');
    for (const service of ['blob', 'queue', 'table']) {
      expect(setting(`AzureWebJobsStorage__${service}ServiceUri`).expression).toBe(
        `storageAccount.properties.primaryEndpoints.${service}`,
      );
    }
    const clientId = setting('AZURE_CLIENT_ID').expression;
    expect(setting('AzureWebJobsStorage__clientId').expression).toBe(clientId);
    expect(setting('APPLICATIONINSIGHTS_AUTHENTICATION_STRING').expression).toBe(
      `'ClientId=\${${clientId}};Authorization=AAD'`,
    );
    expect(setting('CAIRN_BLOB_ENDPOINT').expression).toBe(
      setting('AzureWebJobsStorage__blobServiceUri').expression,
    );
  });

  it('make loadConfig choose the blob backend with the managed identity and Entra ID auth', () => {
    const env = deployedEnvironment();
    const config = loadConfig(env, os.tmpdir());
    expect(config.backend).toStrictEqual({
      kind: 'blob',
      endpoint: 'https://stplaceholder.blob.core.windows.net',
      container: 'cairn',
      accountName: 'stplaceholder',
      managedIdentityClientId: PLACEHOLDERS.AZURE_CLIENT_ID,
    });
    expect(config.apiKeys).toEqual([]);
    expect(config.entra).toStrictEqual({
      issuer: PLACEHOLDERS.CAIRN_AUTH_ISSUER,
      audience: PLACEHOLDERS.CAIRN_AUTH_AUDIENCE,
      jwksUri: PLACEHOLDERS.CAIRN_AUTH_JWKS_URI,
      tenantClaim: 'oid',
    });
    // Followed from main.bicep's defaults, not placeholders.
    expect(config.logLevel).toBe('info');
  });
});

/**
 * Values for settings whose value is an expression only Azure can evaluate (endpoints, identity
 * ids, auth values from the azd environment), shaped like what a deployment produces.
 */
const PLACEHOLDERS = {
  AZURE_CLIENT_ID: '11111111-2222-3333-4444-555555555555',
  CAIRN_BLOB_ENDPOINT: 'https://stplaceholder.blob.core.windows.net/',
  CAIRN_QUEUE_ENDPOINT: 'https://stplaceholder.queue.core.windows.net/',
  CAIRN_TABLE_ENDPOINT: 'https://stplaceholder.table.core.windows.net/',
  CAIRN_AUTH_ISSUER: 'https://login.microsoftonline.com/66666666-7777-8888-9999-000000000000/v2.0',
  CAIRN_AUTH_AUDIENCE: 'api://cairn-placeholder',
  CAIRN_AUTH_JWKS_URI:
    'https://login.microsoftonline.com/66666666-7777-8888-9999-000000000000/discovery/v2.0/keys',
  CAIRN_AUTH_TENANT_CLAIM: 'oid',
  CAIRN_MAX_VALUE_BYTES: '2097152',
} as const satisfies Partial<Record<SettingName, string>>;

/**
 * The environment the Function App would see. A literal is used as written; a value that is a
 * parameter of api.bicep, given by main.bicep from one of its own parameters with a literal
 * default, takes that default (so a bad default fails loadConfig here); anything else takes its
 * placeholder. A CAIRN_* expression without a placeholder fails the test rather than be skipped.
 */
function deployedEnvironment(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const { name, literal, expression } of appSettings()) {
    if (literal !== undefined) {
      env[name] = literal;
      continue;
    }
    const fromDefault = mainDefaultFor(expression);
    const placeholder = (PLACEHOLDERS as Record<string, string | undefined>)[name];
    if (fromDefault !== undefined) env[name] = fromDefault;
    else if (placeholder !== undefined) env[name] = placeholder;
    else if (name.startsWith('CAIRN_') || name === 'AZURE_CLIENT_ID') {
      throw new Error(`no placeholder for ${name} = ${expression}`);
    } else env[name] = 'placeholder';
  }
  return env;
}

function mainDefaultFor(expression: string): string | undefined {
  const api = root('app/api.bicep');
  const main = root('main.bicep');
  if (!declaresParameter(api, expression)) return undefined;
  const given = moduleParameterValue(main, 'api', expression);
  if (given?.type !== 'identifier') return undefined;
  const fallback = parameterDefault(main, given.text);
  if (fallback?.type === 'number') return fallback.text;
  return stringLiteral(fallback);
}

// ---------------------------------------------------------------------------------------------
// Every rule fails on a broken copy

/** A copy of a real template with `from` replaced by `to`; `from` must occur exactly once. */
function broken(file: string, from: string, to: string): string {
  const text = source(file);
  const at = text.indexOf(from);
  if (at === -1 || text.indexOf(from, at + 1) !== -1) {
    throw new Error(`${JSON.stringify(from)} must occur exactly once in ${file}`);
  }
  return text.slice(0, at) + to + text.slice(at + from.length);
}

type Check = (file: string, node: Node) => string[];

const messages =
  (rule: (node: Node) => Violation[]): Check =>
  (_file, node) =>
    rule(node).map((found) => found.message);

const checkWiring: Check = (file, node) => wiring(file, node).map((found) => found.message);
const checkAppSettings: Check = (_file, node) =>
  appSettingViolations(appSettingsResources(node).flat(), APP_SETTING_RULES);

const SETTING_LINE = '    CAIRN_LOG_LEVEL: logLevel\n';
/** Key-shaped text made up here (64 bytes, base64), not a real key. */
const FAKE_KEY = Buffer.from(Array.from({ length: 64 }, (_, i) => (i * 73 + 29) % 256)).toString('base64');

interface BrokenCase {
  readonly name: string;
  readonly file: string;
  readonly from: string;
  readonly to: string;
  readonly check: Check;
  readonly expected: RegExp;
}

const BROKEN: BrokenCase[] = [
  // Syntax.
  {
    name: 'a missing closing brace',
    file: 'app/api.bicep',
    from: '    CAIRN_LOG_LEVEL: logLevel\n  }\n}\n',
    to: '    CAIRN_LOG_LEVEL: logLevel\n  }\n',
    check: messages(syntaxViolations),
    expected: /^(?:missing|unexpected)/,
  },
  {
    name: 'an unterminated string',
    file: 'core/storage/storage-account.bicep',
    from: "kind: 'StorageV2'",
    to: "kind: 'StorageV2",
    check: messages(syntaxViolations),
    expected: /^(?:missing|unexpected)/,
  },
  {
    name: 'a parameter with = and no value',
    file: 'main.bicep',
    from: 'param environmentName string\n',
    to: 'param environmentName string =\n',
    check: messages(syntaxViolations),
    expected: /^(?:missing|unexpected)/,
  },
  // API versions.
  {
    name: 'a resource without an API version',
    file: 'app/api.bicep',
    from: "'Microsoft.Web/sites@2024-04-01'",
    to: "'Microsoft.Web/sites'",
    check: messages(apiVersionViolations),
    expected: /resource functionApp has no pinned API version/,
  },
  {
    name: 'a resource on a floating API version',
    file: 'app/rbac.bicep',
    from: "resource storageRoleAssignments 'Microsoft.Authorization/roleAssignments@2022-04-01'",
    to: "resource storageRoleAssignments 'Microsoft.Authorization/roleAssignments@latest'",
    check: messages(apiVersionViolations),
    expected: /resource storageRoleAssignments has no pinned API version/,
  },
  {
    name: 'a resource whose API version is computed',
    file: 'core/identity/user-assigned-identity.bicep',
    from: "'Microsoft.ManagedIdentity/userAssignedIdentities@2023-01-31'",
    to: "'Microsoft.ManagedIdentity/userAssignedIdentities@${apiVersion}'",
    check: messages(apiVersionViolations),
    expected: /resource identity has no pinned API version/,
  },
  {
    name: 'a registry module without an exact version',
    file: 'main.bicep',
    from: "module plan 'core/host/flex-consumption-plan.bicep'",
    to: "module plan 'br/public:avm/res/web/serverfarm:latest'",
    check: messages(apiVersionViolations),
    expected: /module plan has no pinned version/,
  },
  // Descriptions.
  {
    name: 'a description without Required./Optional.',
    file: 'app/api.bicep',
    from: "@description('Required. Name of the Function App",
    to: "@description('Name of the Function App",
    check: messages(parameterDescriptionViolations),
    expected: /param name needs @description/,
  },
  {
    name: 'a parameter without a description',
    file: 'core/storage/storage-account.bicep',
    from: "@description('Optional. Tags applied to every resource of this module.')\n",
    to: '',
    check: messages(parameterDescriptionViolations),
    expected: /param tags needs @description/,
  },
  {
    name: 'a "Required." parameter with a default',
    file: 'main.bicep',
    from: "@description('Optional. Name of the resource group",
    to: "@description('Required. Name of the resource group",
    check: messages(parameterDescriptionViolations),
    expected: /param resourceGroupName is "Required." but has a default/,
  },
  {
    name: 'an "Optional." parameter without a default',
    file: 'app/api.bicep',
    from: "param serviceName string = 'api'",
    to: 'param serviceName string',
    check: messages(parameterDescriptionViolations),
    expected: /param serviceName is "Optional." but has no default/,
  },
  // Secrets.
  {
    name: 'a storage connection string with an account key',
    file: 'app/api.bicep',
    from: SETTING_LINE,
    to: `${SETTING_LINE}    AzureWebJobsStorage: 'DefaultEndpointsProtocol=https;AccountName=st;AccountKey=\${key}'\n`,
    check: messages(secretViolations),
    expected: /string literal holds a storage account key/,
  },
  {
    name: 'a key read with .listKeys()',
    file: 'app/api.bicep',
    from: SETTING_LINE,
    to: `${SETTING_LINE}    STORAGE_KEY_FOR_DEBUGGING: storageAccount.listKeys().keys[0].value\n`,
    check: messages(secretViolations),
    expected: /listKeys\(\) copies a secret/,
  },
  {
    name: 'a key read with listKeys(id, version)',
    file: 'app/api.bicep',
    from: SETTING_LINE,
    to: `${SETTING_LINE}    STORAGE_KEY_FOR_DEBUGGING: listKeys(storageAccount.id, '2024-01-01').keys[0].value\n`,
    check: messages(secretViolations),
    expected: /listKeys\(\) copies a secret/,
  },
  {
    name: 'a SAS URL',
    file: 'main.bicep',
    from: 'var tags = {',
    to: "var packageUrl = 'https://st.blob.core.windows.net/c/p.zip?sv=2022-11-02&sr=b&sig=abc'\nvar tags = {",
    check: messages(secretViolations),
    expected: /string literal holds a SAS token signature/,
  },
  {
    name: 'key material in a string',
    file: 'app/api.bicep',
    from: SETTING_LINE,
    to: `${SETTING_LINE}    SOMETHING: '${FAKE_KEY}'\n`,
    check: messages(secretViolations),
    expected: /string literal looks like key material/,
  },
  {
    name: 'an API key written into the app settings',
    file: 'app/api.bicep',
    from: SETTING_LINE,
    to: `${SETTING_LINE}    CAIRN_API_KEYS: 'tenant-a:abc'\n`,
    check: messages(secretViolations),
    expected: /CAIRN_API_KEYS is given a literal value/,
  },
  {
    name: 'a @secure() parameter with a default',
    file: 'main.bicep',
    from: 'param environmentName string\n',
    to: "param environmentName string\n\n@secure()\n@description('Optional. x')\nparam adminPassword string = 'hunter2'\n",
    check: messages(secretViolations),
    expected: /@secure\(\) param adminPassword has a default value/,
  },
  // Hardening of storage and telemetry: each required setting flipped, and one left to an expression.
  ...REQUIRED_SETTINGS.map((required): BrokenCase => {
    const property = required.path.at(-1) ?? '';
    const flipped = { false: 'true', true: 'false', "'TLS1_2'": "'TLS1_0'" }[required.value] ?? "'other'";
    return {
      name: `${required.type.split('/')[1] ?? required.type} with ${property}: ${flipped}`,
      file: required.type.startsWith('Microsoft.Storage')
        ? 'core/storage/storage-account.bicep'
        : 'core/monitor/monitoring.bicep',
      from: `    ${property}: ${required.value}\n`,
      to: `    ${property}: ${flipped}\n`,
      check: messages(requiredSettingViolations),
      expected: new RegExp(`${required.path.join('\\.')} must be`),
    };
  }),
  {
    name: 'a storage account whose shared-key setting is a parameter',
    file: 'core/storage/storage-account.bicep',
    from: '    allowSharedKeyAccess: false\n',
    to: '    allowSharedKeyAccess: allowSharedKeyAccess\n',
    check: messages(requiredSettingViolations),
    expected: /allowSharedKeyAccess must be false .* found allowSharedKeyAccess/,
  },
  {
    name: 'a storage account that leaves shared keys unset (Azure allows them by default)',
    file: 'core/storage/storage-account.bicep',
    from: '    allowSharedKeyAccess: false\n',
    to: '',
    check: messages(requiredSettingViolations),
    expected: /allowSharedKeyAccess must be false .* found nothing/,
  },
  // Role assignment names.
  {
    name: 'a role assignment named with a plain string',
    file: 'app/rbac.bicep',
    from: 'name: guid(storageAccount.id, principalId, assignment.roleDefinitionId)',
    to: "name: 'cairn-${assignment.roleDefinitionId}'",
    check: messages(roleAssignmentNameViolations),
    expected: /storageRoleAssignments: name must be guid/,
  },
  {
    name: 'a role assignment guid without its scope',
    file: 'app/rbac.bicep',
    from: 'name: guid(applicationInsights.id, principalId, assignment.roleDefinitionId)',
    to: 'name: guid(principalId, assignment.roleDefinitionId)',
    check: messages(roleAssignmentNameViolations),
    expected: /monitoringRoleAssignments: guid\(\) must start with applicationInsights\.id/,
  },
  {
    name: 'a role assignment guid of another scope',
    file: 'app/rbac.bicep',
    from: 'name: guid(storageAccount.id, principalId, assignment.roleDefinitionId)',
    to: 'name: guid(applicationInsights.id, principalId, assignment.roleDefinitionId)',
    check: messages(roleAssignmentNameViolations),
    expected: /storageRoleAssignments: guid\(\) must start with storageAccount\.id/,
  },
  // App settings against SETTINGS.
  {
    name: 'app settings without CAIRN_BLOB_CONTAINER',
    file: 'app/api.bicep',
    from: '    CAIRN_BLOB_CONTAINER: blobContainerBase\n',
    to: '',
    check: checkAppSettings,
    expected: /^CAIRN_BLOB_CONTAINER is required but not set$/,
  },
  {
    name: 'app settings without AZURE_CLIENT_ID',
    file: 'app/api.bicep',
    from: '    AZURE_CLIENT_ID: identityClientId\n',
    to: '',
    check: checkAppSettings,
    expected: /^AZURE_CLIENT_ID is required but not set$/,
  },
  {
    name: 'app settings with an account key',
    file: 'app/api.bicep',
    from: SETTING_LINE,
    to: `${SETTING_LINE}    CAIRN_STORAGE_ACCOUNT_KEY: storageKey\n`,
    check: checkAppSettings,
    expected: /^CAIRN_STORAGE_ACCOUNT_KEY must not be set in Azure$/,
  },
  {
    name: 'app settings with a misspelt CAIRN_ name',
    file: 'app/api.bicep',
    from: '    CAIRN_LOG_LEVEL: logLevel\n',
    to: '    CAIRN_LOGLEVEL: logLevel\n',
    check: checkAppSettings,
    expected: /^CAIRN_LOGLEVEL is not a setting the app reads$/,
  },
  // Module wiring.
  {
    name: 'a module missing a Required param',
    file: 'main.bicep',
    from: '    blobContainerBase: blobContainerBase\n',
    to: '',
    check: checkWiring,
    expected: /module api: required param blobContainerBase not given/,
  },
  {
    name: 'a module given a param it does not declare',
    file: 'main.bicep',
    from: "    serviceName: 'api'\n",
    to: "    serviceNames: 'api'\n",
    check: checkWiring,
    expected: /module api: app\/api\.bicep has no param serviceNames/,
  },
  {
    name: 'a read of an output the module does not declare',
    file: 'main.bicep',
    from: 'api.outputs.uri',
    to: 'api.outputs.url',
    check: checkWiring,
    expected: /module api has no output url/,
  },
  {
    name: 'a module path that does not exist',
    file: 'main.bicep',
    from: "module plan 'core/host/flex-consumption-plan.bicep'",
    to: "module plan 'core/host/plan.bicep'",
    check: checkWiring,
    expected: /module plan: core\/host\/plan\.bicep does not exist/,
  },
];

describe('each rule fails on a broken copy of a real template', () => {
  // Titles are built here: vitest would cut a $name longer than 40 characters.
  const cases = BROKEN.map((brokenCase) => [`${brokenCase.name} (${brokenCase.file})`, brokenCase] as const);
  it.each(cases)('%s', async (_title, { file, from, to, check, expected }) => {
    expect(check(file, root(file))).toEqual([]);
    const found = check(file, await parseBicep(broken(file, from, to)));
    expect(found).toEqual(expect.arrayContaining([expect.stringMatching(expected)]));
  });

  it('main.parameters.json without a Required param, or with an unknown one', () => {
    const file = JSON.parse(PARAMETERS_JSON) as { parameters: Record<string, unknown> };
    const rest = { ...file.parameters };
    delete rest.authAudience;
    expect(parametersFileViolations(root('main.bicep'), JSON.stringify({ parameters: rest }))).toEqual([
      'required param authAudience is not in the parameters file',
    ]);
    const extra = { parameters: { ...file.parameters, storageSku: { value: 'Standard_LRS' } } };
    expect(parametersFileViolations(root('main.bicep'), JSON.stringify(extra))).toEqual([
      'the template has no param storageSku',
    ]);
  });

  it('loadConfig refuses the environment when CAIRN_BLOB_CONTAINER is dropped from the app settings', () => {
    const env = deployedEnvironment();
    delete env.CAIRN_BLOB_CONTAINER;
    expect(() => loadConfig(env, os.tmpdir())).toThrow(/CAIRN_BLOB_CONTAINER/);
  });
});
