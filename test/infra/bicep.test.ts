/**
 * Offline checks of infra/: every template parsed with the tree-sitter Bicep grammar and held to the
 * decisions the Bicep compiler cannot check, since any alternative compiles too (bicepRules.ts says
 * which; bicepCompile.test.ts runs the compiler itself). Each rule is also run on a deliberately
 * broken copy of a real template, to show that it can fail.
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
  existingResourceNames,
  moduleParameterValue,
  moduleParameterViolations,
  parameterDefault,
  parameterDescriptionViolations,
  parametersFileSecretViolations,
  parametersFileViolations,
  parseBicep,
  REQUIRED_SETTINGS,
  requiredSettingViolations,
  roleAssignmentNameViolations,
  roleGrants,
  secretViolations,
  settingExpressionViolations,
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

// ---------------------------------------------------------------------------------------------
// The project's decisions, written once

/** What the app requires in Azure, read from SETTINGS itself (never a copied list). */
const REQUIRED_IN_BLOB = (Object.entries(SETTINGS) as [SettingName, SettingDoc][])
  .filter(([, doc]) => doc.requiredIn === 'blob')
  .map(([name]) => name);
const APP_SETTING_RULES = {
  required: REQUIRED_IN_BLOB,
  // The account key is for Azurite only (Azure uses AZURE_CLIENT_ID) and the local backend is for
  // a laptop. A plain AzureWebJobsStorage is a connection string; Flex Consumption derives the
  // worker runtime and extension version from functionAppConfig and refuses them as settings.
  forbidden: [
    'CAIRN_STORAGE_ACCOUNT_KEY',
    'CAIRN_KEEP_LOCAL',
    'CAIRN_DATA_DIR',
    'AzureWebJobsStorage',
    'FUNCTIONS_WORKER_RUNTIME',
    'FUNCTIONS_EXTENSION_VERSION',
  ],
  known: Object.keys(SETTINGS),
};

/** Settings whose values are secrets, and the Key Vault secret each one is read from. */
const KEY_VAULT_SECRETS = {
  CAIRN_API_KEYS: 'cairn-api-keys',
  CAIRN_ENCRYPTION_KEYS: 'cairn-encryption-keys',
  CAIRN_AUDIT_SIGNING_KEY: 'cairn-audit-signing-key',
} as const satisfies Partial<Record<SettingName, string>>;

/**
 * The value (source text of app/api.bicep) of every setting that names an identity, an account or
 * a secret. The host's connection goes to the host account, Cairn's endpoints to the data account,
 * both with the user-assigned identity; secrets are Key Vault references without a version, so a
 * rotated secret reaches the app.
 */
const SETTING_EXPRESSIONS: Record<string, string> = {
  AzureWebJobsStorage__blobServiceUri: 'hostStorageAccount.properties.primaryEndpoints.blob',
  AzureWebJobsStorage__queueServiceUri: 'hostStorageAccount.properties.primaryEndpoints.queue',
  AzureWebJobsStorage__tableServiceUri: 'hostStorageAccount.properties.primaryEndpoints.table',
  AzureWebJobsStorage__credential: "'managedidentity'",
  AzureWebJobsStorage__clientId: 'identityClientId',
  AZURE_CLIENT_ID: 'identityClientId',
  APPLICATIONINSIGHTS_AUTHENTICATION_STRING: "'ClientId=${identityClientId};Authorization=AAD'",
  CAIRN_BLOB_ENDPOINT: 'dataStorageAccount.properties.primaryEndpoints.blob',
  CAIRN_QUEUE_ENDPOINT: 'dataStorageAccount.properties.primaryEndpoints.queue',
  CAIRN_TABLE_ENDPOINT: 'dataStorageAccount.properties.primaryEndpoints.table',
  ...Object.fromEntries(
    Object.entries(KEY_VAULT_SECRETS).map(([name, secret]) => [
      name,
      `'@Microsoft.KeyVault(SecretUri=\${keyVault.properties.vaultUri}secrets/${secret}/)'`,
    ]),
  ),
};

/** The resource each `existing` symbol of app/api.bicep and app/rbac.bicep stands for. */
const EXISTING_RESOURCES = new Map([
  ['hostStorageAccount', 'hostStorageAccountName'],
  ['dataStorageAccount', 'dataStorageAccountName'],
  ['keyVault', 'keyVaultName'],
  ['applicationInsights', 'applicationInsightsName'],
]);

/** What main.bicep passes to the modules that could be given the wrong account or identity. */
const MAIN_WIRING = [
  ['rbac', 'hostStorageAccountName', 'hostStorage.outputs.name'],
  ['rbac', 'dataStorageAccountName', 'dataStorage.outputs.name'],
  ['rbac', 'keyVaultName', 'keyVault.outputs.name'],
  ['rbac', 'applicationInsightsName', 'monitoring.outputs.applicationInsightsName'],
  ['rbac', 'principalId', 'identity.outputs.principalId'],
  ['api', 'hostStorageAccountName', 'hostStorage.outputs.name'],
  ['api', 'deploymentStorageContainerName', 'deploymentStorageContainerName'],
  ['api', 'dataStorageAccountName', 'dataStorage.outputs.name'],
  ['api', 'keyVaultName', 'keyVault.outputs.name'],
  ['api', 'applicationInsightsName', 'monitoring.outputs.applicationInsightsName'],
  ['api', 'identityId', 'identity.outputs.id'],
  ['api', 'identityClientId', 'identity.outputs.clientId'],
  ['api', 'appServicePlanId', 'plan.outputs.id'],
  // The deployment package goes to the host account; Cairn's queue to the data account.
  ['hostStorage', 'containerNames', '[ deploymentStorageContainerName ]'],
  ['dataStorage', 'queueNames', "[ 'email-windows' ]"],
  // Soft delete off on the data account: what Cairn deletes must be gone (infra/README.md).
  ['dataStorage', 'deleteRetentionDays', '0'],
] as const;

/** Built-in role definition ids (the same in every tenant) and their names. */
const ROLE_NAMES: Record<string, string> = {
  'b7e6dc6d-f1e8-4753-8033-0f276bb0955b': 'Storage Blob Data Owner',
  'ba92f5b4-2d11-453d-a403-e96b0029c9fe': 'Storage Blob Data Contributor',
  '974c5e8b-45b9-4653-ba55-5f855dd0fb88': 'Storage Queue Data Contributor',
  '0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3': 'Storage Table Data Contributor',
  '4633458b-17de-408a-b874-0445c86b69e6': 'Key Vault Secrets User',
  'b86a8fe4-44ce-4948-aee5-eccb2c155cd7': 'Key Vault Secrets Officer',
  '3913510d-42f4-4e42-8a64-420c390055eb': 'Monitoring Metrics Publisher',
};

/**
 * Who holds which role where: `<scope resource> <- <principal>`. Host storage gets what the
 * Functions documentation requires for identity-based host storage and the Durable task hub (Blob
 * Data Owner included); the data account the three data Contributor roles and nothing more.
 */
const EXPECTED_GRANTS: Record<string, string[]> = {
  'hostStorageAccountName <- principalId': [
    'Storage Blob Data Owner',
    'Storage Queue Data Contributor',
    'Storage Table Data Contributor',
  ],
  'dataStorageAccountName <- principalId': [
    'Storage Blob Data Contributor',
    'Storage Queue Data Contributor',
    'Storage Table Data Contributor',
  ],
  'keyVaultName <- principalId': ['Key Vault Secrets User'],
  'keyVaultName <- vaultOperatorPrincipalId': ['Key Vault Secrets Officer'],
  'applicationInsightsName <- principalId': ['Monitoring Metrics Publisher'],
};

// ---------------------------------------------------------------------------------------------
// Checks over a parsed file, shared by the tests and the broken copies

function appSettingsOf(node: Node): AppSetting[] {
  return appSettingsResources(node).flat();
}

function appSettings(): AppSetting[] {
  return appSettingsOf(root('app/api.bicep'));
}

function grantsByScope(node: Node): Record<string, string[]> {
  const names = existingResourceNames(node);
  const grants: Record<string, string[]> = {};
  for (const grant of roleGrants(node)) {
    const key = `${names.get(grant.scope) ?? grant.scope} <- ${grant.principal}`;
    const roles = grant.roleIds.map((id) => ROLE_NAMES[id] ?? id);
    grants[key] = [...(grants[key] ?? []), ...(roles.length > 0 ? roles : ['(no role found)'])].sort();
  }
  return grants;
}

function grantViolations(node: Node): string[] {
  const actual = grantsByScope(node);
  const keys = new Set([...Object.keys(actual), ...Object.keys(EXPECTED_GRANTS)]);
  return [...keys].flatMap((key) => {
    const want = JSON.stringify(EXPECTED_GRANTS[key] ?? []);
    const have = JSON.stringify(actual[key] ?? []);
    return want === have ? [] : [`${key}: expected ${want}, found ${have}`];
  });
}

function existingResourceViolations(node: Node): string[] {
  return [...existingResourceNames(node)].flatMap(([symbol, name]) => {
    const expected = EXISTING_RESOURCES.get(symbol);
    return expected === name
      ? []
      : [`${symbol} must be the resource named ${expected ?? '?'}, found ${name}`];
  });
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
        'core/security/key-vault.bicep',
        'core/storage/storage-account.bicep',
        'main.bicep',
      ]),
    );
  });

  const RULES: [string, (node: Node) => Violation[]][] = [
    ['parse with no ERROR or MISSING node (a rule run on a broken tree proves nothing)', syntaxViolations],
    ['pin the API version of every resource', apiVersionViolations],
    ['describe every parameter as Required. or Optional.', parameterDescriptionViolations],
    ['hold no literal secret, fetched key or Key Vault secret', secretViolations],
    ['spell out every security and hosting setting of REQUIRED_SETTINGS', requiredSettingViolations],
    ['name every role assignment with guid(scope.id, principal, role)', roleAssignmentNameViolations],
  ];

  it.each(RULES)('%s', (_name, rule) => {
    const violations = Object.fromEntries(
      FILES.map((file) => [file, rule(root(file))] as const).filter(([, found]) => found.length > 0),
    );
    expect(violations).toEqual({});
  });

  it('declare each resource type REQUIRED_SETTINGS is about, in one file (so that no rule passed on nothing)', () => {
    for (const type of new Set(REQUIRED_SETTINGS.map((required) => required.type))) {
      expect(
        FILES.filter((file) => countResources(root(file), type) > 0),
        type,
      ).toHaveLength(1);
    }
  });

  it('match main.parameters.json: every Required param of main.bicep is given, no unknown one, no secret', () => {
    expect(parametersFileViolations(root('main.bicep'), PARAMETERS_JSON)).toEqual([]);
    expect(parametersFileSecretViolations(PARAMETERS_JSON)).toEqual([]);
  });

  it('wire each module of main.bicep to the right account, vault and identity', () => {
    expect(moduleParameterViolations(root('main.bicep'), MAIN_WIRING)).toEqual([]);
  });
});

describe('role assignments', () => {
  it('are all in app/rbac.bicep', () => {
    const counts = Object.fromEntries(
      FILES.map((file) => [file, countResources(root(file), 'Microsoft.Authorization/roleAssignments')]),
    );
    expect(counts).toEqual(
      Object.fromEntries(FILES.map((file) => [file, file === 'app/rbac.bicep' ? 5 : 0])),
    );
  });

  it('grant each role on its own resource: Blob Data Owner on the host account, data Contributor roles on the data account', () => {
    expect(grantViolations(root('app/rbac.bicep'))).toEqual([]);
    expect(grantsByScope(root('app/rbac.bicep'))).toEqual(EXPECTED_GRANTS);
  });

  it('name the resources they are scoped to after the right parameters, and main.bicep passes the identity', () => {
    expect(existingResourceViolations(root('app/rbac.bicep'))).toEqual([]);
    expect([...existingResourceNames(root('app/rbac.bicep')).keys()].sort()).toEqual(
      [...EXISTING_RESOURCES.keys()].sort(),
    );
    expect(moduleParameterValue(root('main.bicep'), 'rbac', 'principalId')?.text).toBe(
      'identity.outputs.principalId',
    );
  });
});

describe('Function App settings', () => {
  it('are set by exactly one appsettings resource, in app/api.bicep', () => {
    const counts = Object.fromEntries(FILES.map((file) => [file, appSettingsResources(root(file)).length]));
    expect(counts).toEqual(Object.fromEntries(FILES.map((file) => [file, file === 'app/api.bicep' ? 1 : 0])));
  });

  it('include every setting SETTINGS requires for the blob backend, known names only, and no key or local setting', () => {
    // AZURE_CLIENT_ID stands for "CAIRN_STORAGE_ACCOUNT_KEY or AZURE_CLIENT_ID": Azure uses the identity.
    expect(REQUIRED_IN_BLOB).toEqual(expect.arrayContaining(['CAIRN_BLOB_ENDPOINT', 'CAIRN_BLOB_CONTAINER']));
    expect(REQUIRED_IN_BLOB).toContain('AZURE_CLIENT_ID');
    expect(appSettingViolations(appSettings(), APP_SETTING_RULES)).toEqual([]);
  });

  it('connect the host to the host account and Cairn to the data account with the identity; secrets from Key Vault', () => {
    expect(settingExpressionViolations(appSettings(), SETTING_EXPRESSIONS)).toEqual([]);
    expect(existingResourceViolations(root('app/api.bicep'))).toEqual([]);
    expect([...existingResourceNames(root('app/api.bicep')).keys()].sort()).toEqual(
      [...EXISTING_RESOURCES.keys()].sort(),
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

  it('stop the app when Azure leaves a Key Vault reference unresolved (the reference text stays in the setting)', () => {
    const env = deployedEnvironment();
    const reference = setting('CAIRN_API_KEYS').expression;
    // What the app sees when the secret is missing or the identity may not read it.
    env.CAIRN_API_KEYS = reference
      .slice(1, -1)
      .replace('${keyVault.properties.vaultUri}', 'https://kv-cairn-placeholder.vault.azure.net/');
    expect(env.CAIRN_API_KEYS).toBe(
      '@Microsoft.KeyVault(SecretUri=https://kv-cairn-placeholder.vault.azure.net/secrets/cairn-api-keys/)',
    );
    expect(() => loadConfig(env, os.tmpdir())).toThrow(/CAIRN_API_KEYS/);
  });
});

function setting(name: string): AppSetting {
  const found = appSettings().find((candidate) => candidate.name === name);
  if (found === undefined) throw new Error(`app setting ${name} is not set`);
  return found;
}

/**
 * Values for settings whose value is an expression only Azure can evaluate (endpoints, identity
 * ids, auth values from the azd environment, resolved Key Vault references), shaped like what a
 * deployment produces. The secrets resolve to a blank value: the operator turned them off.
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
  CAIRN_API_KEYS: ' ',
  CAIRN_ENCRYPTION_KEYS: ' ',
  CAIRN_AUDIT_SIGNING_KEY: ' ',
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

type Check = (node: Node) => string[];

const messages =
  (rule: (node: Node) => Violation[]): Check =>
  (node) =>
    rule(node).map((found) => found.message);

const checkAppSettings: Check = (node) => appSettingViolations(appSettingsOf(node), APP_SETTING_RULES);
const checkSettingExpressions: Check = (node) =>
  settingExpressionViolations(appSettingsOf(node), SETTING_EXPRESSIONS);
const checkWiring: Check = (node) => moduleParameterViolations(node, MAIN_WIRING);

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

/** The one file that deploys a resource type (the test above checks there is exactly one). */
function fileDeclaring(type: string): string {
  const file = FILES.find((candidate) => countResources(root(candidate), type) > 0);
  if (file === undefined) throw new Error(`no template deploys ${type}`);
  return file;
}

/** A realistic wrong value for a required one: the alternative someone might write. */
const FLIPPED: Record<string, string> = {
  false: 'true',
  true: 'false',
  "'TLS1_2'": "'TLS1_0'",
  "'FC1'": "'Y1'",
  "'FlexConsumption'": "'Dynamic'",
  "'functionapp,linux'": "'functionapp'",
  "'UserAssigned'": "'SystemAssigned'",
  "'UserAssignedIdentity'": "'StorageAccountConnectionString'",
  "'22'": "'20'",
  identityId: "''",
};

/** REQUIRED_SETTINGS cases are built once the templates are parsed (they look up their file). */
function requiredSettingCases(): BrokenCase[] {
  return REQUIRED_SETTINGS.map((required): BrokenCase => {
    const property = required.path.at(-1) ?? '';
    const file = fileDeclaring(required.type);
    const line = source(file)
      .split('\n')
      .find((candidate) => candidate.trim() === `${property}: ${required.value}`);
    if (line === undefined) throw new Error(`${file} has no line "${property}: ${required.value}"`);
    const flipped = FLIPPED[required.value] ?? "'other'";
    return {
      name: `${required.type.split('/').at(-1) ?? required.type} with ${property}: ${flipped}`,
      file,
      from: `${line}\n`,
      to: `${line.replace(required.value, flipped)}\n`,
      check: messages(requiredSettingViolations),
      expected: new RegExp(`${required.path.join('\\.')} must be`),
    };
  });
}

const BROKEN: BrokenCase[] = [
  // Syntax (the tree the other rules walk).
  {
    name: 'a missing closing brace',
    file: 'app/api.bicep',
    from: "    CAIRN_AUDIT_SIGNING_KEY: '@Microsoft.KeyVault(SecretUri=${keyVault.properties.vaultUri}secrets/cairn-audit-signing-key/)'\n  }\n}\n",
    to: "    CAIRN_AUDIT_SIGNING_KEY: '@Microsoft.KeyVault(SecretUri=${keyVault.properties.vaultUri}secrets/cairn-audit-signing-key/)'\n  }\n",
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
  // API versions.
  {
    name: 'a resource on a floating API version',
    file: 'app/rbac.bicep',
    from: "resource hostStorageRoleAssignments 'Microsoft.Authorization/roleAssignments@2022-04-01'",
    to: "resource hostStorageRoleAssignments 'Microsoft.Authorization/roleAssignments@latest'",
    check: messages(apiVersionViolations),
    expected: /resource hostStorageRoleAssignments has no pinned API version/,
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
    to: `${SETTING_LINE}    STORAGE_FOR_DEBUGGING: 'DefaultEndpointsProtocol=https;AccountName=st;AccountKey=\${key}'\n`,
    check: messages(secretViolations),
    expected: /string literal holds a storage account key/,
  },
  {
    name: 'a key read with .listKeys()',
    file: 'app/api.bicep',
    from: SETTING_LINE,
    to: `${SETTING_LINE}    STORAGE_KEY_FOR_DEBUGGING: dataStorageAccount.listKeys().keys[0].value\n`,
    check: messages(secretViolations),
    expected: /listKeys\(\) copies a secret/,
  },
  {
    name: 'a key read with listKeys(id, version)',
    file: 'app/api.bicep',
    from: SETTING_LINE,
    to: `${SETTING_LINE}    STORAGE_KEY_FOR_DEBUGGING: listKeys(dataStorageAccount.id, '2024-01-01').keys[0].value\n`,
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
    name: 'an API key written into the app settings instead of a Key Vault reference',
    file: 'app/api.bicep',
    from: "    CAIRN_API_KEYS: '@Microsoft.KeyVault(SecretUri=${keyVault.properties.vaultUri}secrets/cairn-api-keys/)'\n",
    to: "    CAIRN_API_KEYS: 'tenant-a:abc'\n",
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
  {
    name: 'a Key Vault secret created by the template',
    file: 'core/security/key-vault.bicep',
    from: "@description('Name of the vault.')",
    to: "resource apiKeys 'Microsoft.KeyVault/vaults/secrets@2024-11-01' = {\n  parent: keyVault\n  name: 'cairn-api-keys'\n  properties: {\n    value: apiKeysValue\n  }\n}\n\n@description('Name of the vault.')",
    check: messages(secretViolations),
    expected: /apiKeys: a secret created by a template carries its value/,
  },
  // Hardening and hosting (the REQUIRED_SETTINGS cases are added below), and two ways to dodge it.
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
    from: 'name: guid(dataStorageAccount.id, principalId, roleId)',
    to: "name: 'cairn-${roleId}'",
    check: messages(roleAssignmentNameViolations),
    expected: /dataStorageRoleAssignments: name must be guid/,
  },
  {
    name: 'a role assignment guid without its scope',
    file: 'app/rbac.bicep',
    from: 'name: guid(applicationInsights.id, principalId, roles.monitoringMetricsPublisher)',
    to: 'name: guid(principalId, roles.monitoringMetricsPublisher)',
    check: messages(roleAssignmentNameViolations),
    expected: /monitoringRoleAssignment: guid\(\) must start with applicationInsights\.id/,
  },
  {
    name: 'a role assignment guid of another scope',
    file: 'app/rbac.bicep',
    from: 'name: guid(hostStorageAccount.id, principalId, roleId)',
    to: 'name: guid(dataStorageAccount.id, principalId, roleId)',
    check: messages(roleAssignmentNameViolations),
    expected: /hostStorageRoleAssignments: guid\(\) must start with hostStorageAccount\.id/,
  },
  // Role scopes.
  {
    name: 'Blob Data Owner on the data account',
    file: 'app/rbac.bicep',
    from: 'var dataStorageRoles = [\n  roles.storageBlobDataContributor\n',
    to: 'var dataStorageRoles = [\n  roles.storageBlobDataOwner\n',
    check: grantViolations,
    expected: /^dataStorageAccountName <- principalId: expected .*found .*Storage Blob Data Owner/,
  },
  {
    name: 'Blob Data Contributor instead of Owner on the host account',
    file: 'app/rbac.bicep',
    from: 'var hostStorageRoles = [\n  roles.storageBlobDataOwner\n',
    to: 'var hostStorageRoles = [\n  roles.storageBlobDataContributor\n',
    check: grantViolations,
    expected: /^hostStorageAccountName <- principalId: expected \["Storage Blob Data Owner"/,
  },
  {
    name: 'Storage Account Contributor (it can list keys) on the data account',
    file: 'app/rbac.bicep',
    from: 'var dataStorageRoles = [\n',
    to: "var dataStorageRoles = [\n  '17d1049b-9a84-46fb-8f53-869881c3d3ab'\n",
    check: grantViolations,
    expected: /^dataStorageAccountName <- principalId: .*found .*17d1049b-9a84-46fb-8f53-869881c3d3ab/,
  },
  {
    name: "the host account's roles scoped to the data account",
    file: 'app/rbac.bicep',
    from: '    scope: hostStorageAccount\n',
    to: '    scope: dataStorageAccount\n',
    check: grantViolations,
    expected: /^hostStorageAccountName <- principalId: expected \[.*\], found \[\]/,
  },
  {
    name: 'Key Vault Secrets Officer for the app',
    file: 'app/rbac.bicep',
    from: "roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.keyVaultSecretsUser)",
    to: "roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.keyVaultSecretsOfficer)",
    check: grantViolations,
    expected:
      /^keyVaultName <- principalId: expected \["Key Vault Secrets User"\], found \["Key Vault Secrets Officer"\]/,
  },
  {
    name: 'an existing account symbol that names the other account',
    file: 'app/rbac.bicep',
    from: 'existing = {\n  name: dataStorageAccountName\n}',
    to: 'existing = {\n  name: hostStorageAccountName\n}',
    check: existingResourceViolations,
    expected:
      /^dataStorageAccount must be the resource named dataStorageAccountName, found hostStorageAccountName$/,
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
    name: 'app settings with a connection string for the host',
    file: 'app/api.bicep',
    from: SETTING_LINE,
    to: `${SETTING_LINE}    AzureWebJobsStorage: hostConnection\n`,
    check: checkAppSettings,
    expected: /^AzureWebJobsStorage must not be set in Azure$/,
  },
  {
    name: 'app settings with a misspelt CAIRN_ name',
    file: 'app/api.bicep',
    from: '    CAIRN_LOG_LEVEL: logLevel\n',
    to: '    CAIRN_LOGLEVEL: logLevel\n',
    check: checkAppSettings,
    expected: /^CAIRN_LOGLEVEL is not a setting the app reads$/,
  },
  // Which account, identity and secret each setting uses.
  {
    name: 'CAIRN_TABLE_ENDPOINT on the queue endpoint',
    file: 'app/api.bicep',
    from: 'CAIRN_TABLE_ENDPOINT: dataStorageAccount.properties.primaryEndpoints.table',
    to: 'CAIRN_TABLE_ENDPOINT: dataStorageAccount.properties.primaryEndpoints.queue',
    check: checkSettingExpressions,
    expected:
      /^CAIRN_TABLE_ENDPOINT must be dataStorageAccount\.properties\.primaryEndpoints\.table, found .*\.queue$/,
  },
  {
    name: 'CAIRN_BLOB_ENDPOINT on the host account',
    file: 'app/api.bicep',
    from: 'CAIRN_BLOB_ENDPOINT: dataStorageAccount.properties.primaryEndpoints.blob',
    to: 'CAIRN_BLOB_ENDPOINT: hostStorageAccount.properties.primaryEndpoints.blob',
    check: checkSettingExpressions,
    expected: /^CAIRN_BLOB_ENDPOINT must be dataStorageAccount\./,
  },
  {
    name: 'CAIRN_QUEUE_ENDPOINT on the host account',
    file: 'app/api.bicep',
    from: 'CAIRN_QUEUE_ENDPOINT: dataStorageAccount.properties.primaryEndpoints.queue',
    to: 'CAIRN_QUEUE_ENDPOINT: hostStorageAccount.properties.primaryEndpoints.queue',
    check: checkSettingExpressions,
    expected: /^CAIRN_QUEUE_ENDPOINT must be dataStorageAccount\./,
  },
  {
    name: 'the host connection on the data account',
    file: 'app/api.bicep',
    from: 'AzureWebJobsStorage__tableServiceUri: hostStorageAccount.properties.primaryEndpoints.table',
    to: 'AzureWebJobsStorage__tableServiceUri: dataStorageAccount.properties.primaryEndpoints.table',
    check: checkSettingExpressions,
    expected: /^AzureWebJobsStorage__tableServiceUri must be hostStorageAccount\./,
  },
  {
    name: 'the host connection without its managed identity credential',
    file: 'app/api.bicep',
    from: "    AzureWebJobsStorage__credential: 'managedidentity'\n",
    to: '',
    check: checkSettingExpressions,
    expected: /^AzureWebJobsStorage__credential is not set$/,
  },
  {
    name: 'the host connection with another client id',
    file: 'app/api.bicep',
    from: '    AzureWebJobsStorage__clientId: identityClientId\n',
    to: '    AzureWebJobsStorage__clientId: otherClientId\n',
    check: checkSettingExpressions,
    expected: /^AzureWebJobsStorage__clientId must be identityClientId, found otherClientId$/,
  },
  {
    name: 'a secret pinned to one version (a rotated secret would never arrive)',
    file: 'app/api.bicep',
    from: 'secrets/cairn-encryption-keys/)',
    to: 'secrets/cairn-encryption-keys/0123456789abcdef0123456789abcdef)',
    check: checkSettingExpressions,
    expected: /^CAIRN_ENCRYPTION_KEYS must be '@Microsoft\.KeyVault/,
  },
  {
    name: 'a secret given as a parameter value instead of a Key Vault reference',
    file: 'app/api.bicep',
    from: "    CAIRN_AUDIT_SIGNING_KEY: '@Microsoft.KeyVault(SecretUri=${keyVault.properties.vaultUri}secrets/cairn-audit-signing-key/)'\n",
    to: '    CAIRN_AUDIT_SIGNING_KEY: auditSigningKey\n',
    check: checkSettingExpressions,
    expected: /^CAIRN_AUDIT_SIGNING_KEY must be '@Microsoft\.KeyVault.*found auditSigningKey$/,
  },
  // What main.bicep passes where.
  {
    name: 'the roles of the host account given to the data account',
    file: 'main.bicep',
    from: '    hostStorageAccountName: hostStorage.outputs.name\n    dataStorageAccountName: dataStorage.outputs.name\n',
    to: '    hostStorageAccountName: dataStorage.outputs.name\n    dataStorageAccountName: hostStorage.outputs.name\n',
    check: checkWiring,
    expected:
      /^module rbac: hostStorageAccountName must be hostStorage\.outputs\.name, found dataStorage\.outputs\.name$/,
  },
  {
    name: "the app's data endpoints on the host account",
    file: 'main.bicep',
    from: '    deploymentStorageContainerName: deploymentStorageContainerName\n    dataStorageAccountName: dataStorage.outputs.name\n',
    to: '    deploymentStorageContainerName: deploymentStorageContainerName\n    dataStorageAccountName: hostStorage.outputs.name\n',
    check: checkWiring,
    expected: /^module api: dataStorageAccountName must be dataStorage\.outputs\.name/,
  },
  {
    name: 'soft delete on the data account',
    file: 'main.bicep',
    from: '    deleteRetentionDays: 0\n',
    to: '    deleteRetentionDays: 7\n',
    check: checkWiring,
    expected: /^module dataStorage: deleteRetentionDays must be 0, found 7$/,
  },
  {
    name: 'the deployment container on the data account',
    file: 'main.bicep',
    from: '    containerNames: [\n      deploymentStorageContainerName\n    ]\n',
    to: '',
    check: checkWiring,
    expected:
      /^module hostStorage: containerNames must be \[ deploymentStorageContainerName \], found nothing$/,
  },
];

describe('each rule fails on a broken copy of a real template', () => {
  // Titles are built here: vitest would cut a $name longer than 40 characters.
  const titled = (cases: readonly BrokenCase[]) =>
    cases.map((brokenCase) => [`${brokenCase.name} (${brokenCase.file})`, brokenCase] as const);
  const run = async ({ file, from, to, check, expected }: BrokenCase) => {
    expect(check(root(file))).toEqual([]);
    const found = check(await parseBicep(broken(file, from, to)));
    expect(found).toEqual(expect.arrayContaining([expect.stringMatching(expected)]));
  };

  it.each(titled(BROKEN))('%s', async (_title, brokenCase) => run(brokenCase));

  it('every REQUIRED_SETTINGS entry, flipped to a plausible alternative', async () => {
    const cases = requiredSettingCases();
    expect(cases).toHaveLength(REQUIRED_SETTINGS.length);
    for (const brokenCase of cases) await run(brokenCase);
  });

  it('main.parameters.json without a Required param, with an unknown one, or with a secret', () => {
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
    const secrets = {
      parameters: {
        ...file.parameters,
        apiKeys: { value: 'tenant-a:abc' },
        storageConnection: { value: 'DefaultEndpointsProtocol=https;AccountName=st;AccountKey=abc' },
        signingKey: { value: FAKE_KEY },
      },
    };
    expect(parametersFileSecretViolations(JSON.stringify(secrets))).toEqual([
      'apiKeys is given a literal value',
      'storageConnection holds a storage account key',
      'storageConnection holds a storage connection string',
      'signingKey looks like key material',
    ]);
  });

  it('loadConfig refuses the environment when CAIRN_BLOB_CONTAINER is dropped from the app settings', () => {
    const env = deployedEnvironment();
    delete env.CAIRN_BLOB_CONTAINER;
    expect(() => loadConfig(env, os.tmpdir())).toThrow(/CAIRN_BLOB_CONTAINER/);
  });
});
