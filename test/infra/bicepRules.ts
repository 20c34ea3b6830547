/**
 * Offline checks of the Bicep templates under `infra/`, on the syntax tree that the tree-sitter
 * Bicep grammar (run by web-tree-sitter, WASM: nothing native, no network) gives for each file.
 *
 * The Bicep compiler (bicepCompile.test.ts) proves that the templates type-check: symbols, property
 * names, enum values, lengths, module parameters and outputs. These rules hold the templates to what
 * the compiler cannot know, because every alternative would compile too: which account each
 * setting and role points at, that no credential is written or fetched, that the hosting and
 * security settings are the ones this project decided (Flex Consumption, Node 22, identity-based
 * connections, RBAC on Key Vault), and the project's conventions (pinned API versions, described
 * parameters, deterministic role assignment names).
 *
 * Every rule returns a list of {@link Violation}s (or messages); an empty list means the rule holds.
 */
import { createRequire } from 'node:module';

import { Language, type Node, Parser } from 'web-tree-sitter';

export interface Violation {
  readonly rule: string;
  /** 1-based line in the file. */
  readonly line: number;
  readonly message: string;
}

let parserPromise: Promise<Parser> | undefined;

/** One parser per process: loading the WASM runtime and grammar is the slow part (tens of ms). */
export function bicepParser(): Promise<Parser> {
  parserPromise ??= (async () => {
    await Parser.init();
    // The grammar package ships its WASM build next to its package.json.
    const wasm = createRequire(import.meta.url).resolve('tree-sitter-bicep/tree-sitter-bicep.wasm');
    const parser = new Parser();
    parser.setLanguage(await Language.load(wasm));
    return parser;
  })();
  return parserPromise;
}

/** The root node of a Bicep source. The tree lives as long as the process (tests are short-lived). */
export async function parseBicep(source: string): Promise<Node> {
  const tree = (await bicepParser()).parse(source);
  if (tree === null) throw new Error('tree-sitter returned no tree');
  return tree.rootNode;
}

// ---------------------------------------------------------------------------------------------
// Tree helpers

function violation(rule: string, node: Node, message: string): Violation {
  return { rule, line: node.startPosition.row + 1, message };
}

function walk(node: Node, visit: (node: Node) => void): void {
  visit(node);
  for (const child of node.children) walk(child, visit);
}

function descendants(node: Node, type: string): Node[] {
  const found: Node[] = [];
  walk(node, (candidate) => {
    if (candidate.type === type) found.push(candidate);
  });
  return found;
}

/** Named children without comments (comments are "extras" and may sit anywhere). */
function namedChildren(node: Node): Node[] {
  return node.namedChildren.filter((child) => !child.isExtra);
}

/** The value of a plain string literal; undefined for interpolated strings and other expressions. */
export function stringLiteral(node: Node | undefined): string | undefined {
  if (node?.type !== 'string') return undefined;
  let value = '';
  for (const child of namedChildren(node)) {
    if (child.type === 'string_content') value += child.text;
    else if (child.type === 'escape_sequence') value += unescape(child.text);
    else return undefined;
  }
  return value;
}

function unescape(sequence: string): string {
  const escapes: Record<string, string> = { "\\'": "'", '\\\\': '\\', '\\n': '\n', '\\r': '\r', '\\t': '\t' };
  return escapes[sequence] ?? (sequence.startsWith('\\$') ? sequence.slice(1) : sequence);
}

function propertyKey(property: Node): string | undefined {
  const key = namedChildren(property)[0];
  if (key === undefined) return undefined;
  return key.type === 'identifier' ? key.text : stringLiteral(key);
}

/** The properties of an object literal, in order, as [key, value node]. */
function objectProperties(object: Node): [string, Node][] {
  const entries: [string, Node][] = [];
  for (const property of namedChildren(object)) {
    if (property.type !== 'object_property') continue;
    const children = namedChildren(property);
    const key = propertyKey(property);
    const value = children[children.length - 1];
    if (key !== undefined && value !== undefined && children.length === 2) entries.push([key, value]);
  }
  return entries;
}

function objectProperty(object: Node | undefined, key: string): Node | undefined {
  if (object?.type !== 'object') return undefined;
  return objectProperties(object).find(([name]) => name === key)?.[1];
}

function propertyAt(object: Node | undefined, keys: readonly string[]): Node | undefined {
  let current = object;
  for (const key of keys) current = objectProperty(current, key);
  return current;
}

interface Declaration {
  readonly node: Node;
  readonly symbol: string;
  /** The quoted type or path, e.g. `Microsoft.Web/sites@2024-04-01` or `app/api.bicep`. */
  readonly reference: string | undefined;
  readonly referenceNode: Node | undefined;
  readonly existing: boolean;
  /** The body object(s): one, or the object inside a loop and/or condition. */
  readonly bodies: Node[];
}

function bodiesOf(value: Node | undefined): Node[] {
  if (value === undefined) return [];
  if (value.type === 'object') return [value];
  if (value.type === 'for_statement' || value.type === 'if_statement') {
    return bodiesOf(namedChildren(value).at(-1));
  }
  return [];
}

/** Resource or module declarations, including resources nested in other resources. */
function declarations(root: Node, type: 'resource_declaration' | 'module_declaration'): Declaration[] {
  return descendants(root, type).map((node) => {
    const children = namedChildren(node);
    const referenceNode = children[1];
    return {
      node,
      symbol: children[0]?.text ?? '',
      reference: stringLiteral(referenceNode),
      referenceNode,
      existing: node.children.some((child) => child.type === 'existing'),
      bodies: bodiesOf(children.at(-1)),
    };
  });
}

function resourceType(declaration: Declaration): string | undefined {
  return declaration.reference?.split('@')[0];
}

function sameType(a: string | undefined, b: string): boolean {
  return a !== undefined && a.toLowerCase() === b.toLowerCase();
}

/** The decorators written above a declaration (they are the preceding `decorators` sibling). */
function decoratorsOf(declaration: Node): Node[] {
  let previous = declaration.previousNamedSibling;
  while (previous?.isExtra === true) previous = previous.previousNamedSibling;
  return previous?.type === 'decorators' ? namedChildren(previous).filter((d) => d.type === 'decorator') : [];
}

/** The call of a decorator named `name` (`@name(...)` or `@sys.name(...)`), if present. */
function decoratorCall(declaration: Node, name: string): Node | undefined {
  for (const decorator of decoratorsOf(declaration)) {
    const call = namedChildren(decorator)[0];
    if (call?.type !== 'call_expression') continue;
    if (calleeName(call) === name) return call;
  }
  return undefined;
}

/** The name of the called function: `f` in `f(...)`, `listKeys` in `st.listKeys()`, `description` in `sys.description(...)`. */
function calleeName(call: Node): string | undefined {
  const callee = namedChildren(call)[0];
  if (callee?.type === 'identifier') return callee.text;
  if (callee?.type === 'member_expression') return callee.childForFieldName('property')?.text;
  return undefined;
}

function callArguments(call: Node): Node[] {
  const args = namedChildren(call).find((child) => child.type === 'arguments');
  return args === undefined ? [] : namedChildren(args);
}

interface Parameter {
  readonly node: Node;
  readonly name: string;
  readonly hasDefault: boolean;
  readonly nullable: boolean;
  readonly defaultValue: Node | undefined;
}

function parameters(root: Node): Parameter[] {
  return namedChildren(root)
    .filter((node) => node.type === 'parameter_declaration')
    .map((node) => {
      const children = namedChildren(node);
      const hasDefault = node.children.some((child) => child.type === '=');
      return {
        node,
        name: children[0]?.text ?? '',
        hasDefault,
        nullable: children[1]?.namedChildren[0]?.type === 'nullable_type',
        defaultValue: hasDefault ? children.at(-1) : undefined,
      };
    });
}

// ---------------------------------------------------------------------------------------------
// Rules

/** The file parses: no ERROR node (unexpected text) and no MISSING node (text the parser had to invent). */
export function syntaxViolations(root: Node): Violation[] {
  const found: Violation[] = [];
  walk(root, (node) => {
    if (node.isError)
      found.push(violation('syntax', node, `unexpected ${JSON.stringify(node.text.slice(0, 40))}`));
    else if (node.isMissing) found.push(violation('syntax', node, `missing ${JSON.stringify(node.type)}`));
  });
  return found;
}

const PINNED_API_VERSION = /^[^@\s$]+@\d{4}-\d{2}-\d{2}(?:-preview)?$/;
/** Registry modules (`br:` / `br/alias:`) must name an exact version, not a floating tag. */
const PINNED_MODULE_VERSION = /:\d+\.\d+\.\d+$/;

/**
 * Every resource names its API version explicitly (`type@yyyy-mm-dd`, optionally `-preview`), so a
 * deployment means the same thing tomorrow; every registry module names an exact version.
 */
export function apiVersionViolations(root: Node): Violation[] {
  const found: Violation[] = [];
  for (const resource of declarations(root, 'resource_declaration')) {
    if (resource.reference === undefined || !PINNED_API_VERSION.test(resource.reference)) {
      found.push(
        violation(
          'api-version',
          resource.node,
          `resource ${resource.symbol} has no pinned API version: ${resource.referenceNode?.text ?? '?'}`,
        ),
      );
    }
  }
  for (const module of declarations(root, 'module_declaration')) {
    const reference = module.reference ?? '';
    if (/^br[:/]/.test(reference) && !PINNED_MODULE_VERSION.test(reference)) {
      found.push(
        violation('api-version', module.node, `module ${module.symbol} has no pinned version: ${reference}`),
      );
    }
  }
  return found;
}

/**
 * Every parameter has `@description('Required. ...')` or `@description('Optional. ...')` (the Azure
 * Verified Modules convention), and the word is true: a Required parameter has no default, an
 * Optional one has a default or a nullable type.
 */
export function parameterDescriptionViolations(root: Node): Violation[] {
  const found: Violation[] = [];
  for (const parameter of parameters(root)) {
    const call = decoratorCall(parameter.node, 'description');
    const text = call === undefined ? undefined : stringLiteral(callArguments(call)[0]);
    const kind = text?.startsWith('Required. ')
      ? 'Required'
      : text?.startsWith('Optional. ')
        ? 'Optional'
        : undefined;
    if (kind === undefined) {
      found.push(
        violation(
          'description',
          parameter.node,
          `param ${parameter.name} needs @description('Required. ...') or @description('Optional. ...')`,
        ),
      );
    } else if (kind === 'Required' && parameter.hasDefault) {
      found.push(
        violation('description', parameter.node, `param ${parameter.name} is "Required." but has a default`),
      );
    } else if (kind === 'Optional' && !parameter.hasDefault && !parameter.nullable) {
      found.push(
        violation('description', parameter.node, `param ${parameter.name} is "Optional." but has no default`),
      );
    }
  }
  return found;
}

/** Text that only a credential contains. Tested on the raw text of every string literal. */
const SECRET_TEXT: readonly [string, RegExp][] = [
  ['storage account key', /AccountKey\s*=/i],
  ['SAS connection string', /SharedAccessSignature\s*=/i],
  ['shared access key', /SharedAccessKey\s*=/i],
  ['storage connection string', /DefaultEndpointsProtocol\s*=/i],
  ['SAS token signature', /[?&]sig=/i],
  ['password', /\b(?:Password|Pwd)\s*=/i],
  ['private key', /-----BEGIN [A-Z ]*PRIVATE KEY-----/],
  ['JSON web token', /\beyJ[\w-]{8,}\.eyJ[\w-]{8,}\./],
];

/** Property names that, given a literal value, are a secret in the template. */
const SECRET_PROPERTY =
  /(?:password|secret|api_?keys?|account_?key|shared_?key|access_?key|sas_?token|client_?secret)$/i;

/** A long base64 run with mixed case and digits: the shape of a storage key or signing secret. */
function looksLikeKeyMaterial(text: string): boolean {
  for (const match of text.matchAll(/[A-Za-z0-9+/]{40,}={0,2}/g)) {
    const run = match[0];
    const digits = run.replace(/[^0-9]/g, '').length;
    const upper = run.replace(/[^A-Z]/g, '').length;
    const lower = run.replace(/[^a-z]/g, '').length;
    if (digits >= 4 && upper >= 4 && lower >= 4) return true;
  }
  return false;
}

/**
 * No secret is written into a template or fetched by one: no connection string, account key, SAS,
 * password, token or key material in a string literal; no `list*()` call (listKeys, listAccountSas,
 * listSecrets...), which would copy a secret into the deployment; no literal value for a property
 * named like a secret; no default value for a `@secure()` parameter; no Key Vault secret resource
 * (its value would be in the template or its parameters, and in the deployment history).
 */
export function secretViolations(root: Node): Violation[] {
  const found: Violation[] = [];
  walk(root, (node) => {
    if (node.type === 'string') {
      for (const [what, pattern] of SECRET_TEXT) {
        if (pattern.test(node.text)) found.push(violation('secret', node, `string literal holds a ${what}`));
      }
      if (looksLikeKeyMaterial(node.text))
        found.push(violation('secret', node, 'string literal looks like key material'));
    } else if (node.type === 'call_expression') {
      const name = calleeName(node);
      if (name !== undefined && /^list[A-Z]/.test(name)) {
        found.push(violation('secret', node, `${name}() copies a secret into the deployment`));
      }
    } else if (node.type === 'object_property') {
      const key = propertyKey(node);
      const value = namedChildren(node).at(-1);
      const literal = stringLiteral(value);
      if (key !== undefined && SECRET_PROPERTY.test(key) && literal !== undefined && literal !== '') {
        found.push(violation('secret', node, `${key} is given a literal value`));
      }
    }
  });
  for (const resource of declarations(root, 'resource_declaration')) {
    if (!resource.existing && sameType(resourceType(resource), 'Microsoft.KeyVault/vaults/secrets')) {
      found.push(
        violation(
          'secret',
          resource.node,
          `${resource.symbol}: a secret created by a template carries its value in the deployment`,
        ),
      );
    }
  }
  for (const parameter of parameters(root)) {
    if (decoratorCall(parameter.node, 'secure') !== undefined && parameter.hasDefault) {
      const literal = stringLiteral(parameter.defaultValue);
      if (literal !== '') {
        found.push(
          violation('secret', parameter.node, `@secure() param ${parameter.name} has a default value`),
        );
      }
    }
  }
  return found;
}

interface RequiredSetting {
  readonly type: string;
  readonly path: readonly string[];
  /** The exact source text required, e.g. `false` or `'TLS1_2'` (an expression proves nothing offline). */
  readonly value: string;
  readonly why: string;
}

/**
 * Security and hosting settings that every (non-`existing`) resource of a type must spell out. The
 * compiler accepts any of the alternatives (another SKU, a connection-string deployment, Node 20,
 * access policies), so only a rule can hold the templates to these decisions.
 */
export const REQUIRED_SETTINGS: readonly RequiredSetting[] = [
  {
    type: 'Microsoft.Storage/storageAccounts',
    path: ['properties', 'allowSharedKeyAccess'],
    value: 'false',
    why: 'only Entra ID may reach storage',
  },
  {
    type: 'Microsoft.Storage/storageAccounts',
    path: ['properties', 'allowBlobPublicAccess'],
    value: 'false',
    why: 'no anonymous reads',
  },
  {
    type: 'Microsoft.Storage/storageAccounts',
    path: ['properties', 'minimumTlsVersion'],
    value: "'TLS1_2'",
    why: 'no TLS 1.0/1.1',
  },
  {
    type: 'Microsoft.Storage/storageAccounts',
    path: ['properties', 'supportsHttpsTrafficOnly'],
    value: 'true',
    why: 'no plain HTTP',
  },
  {
    type: 'Microsoft.Storage/storageAccounts/blobServices',
    path: ['properties', 'isVersioningEnabled'],
    value: 'false',
    why: 'a version kept of every overwrite would keep data that Cairn deleted',
  },
  {
    type: 'Microsoft.Insights/components',
    path: ['properties', 'DisableLocalAuth'],
    value: 'true',
    why: 'telemetry only with an Entra ID token',
  },
  {
    type: 'Microsoft.KeyVault/vaults',
    path: ['properties', 'enableRbacAuthorization'],
    value: 'true',
    why: 'access by Azure RBAC roles, not access policies',
  },
  {
    type: 'Microsoft.Web/serverfarms',
    path: ['sku', 'name'],
    value: "'FC1'",
    why: 'the Flex Consumption plan',
  },
  {
    type: 'Microsoft.Web/serverfarms',
    path: ['sku', 'tier'],
    value: "'FlexConsumption'",
    why: 'the Flex Consumption plan',
  },
  {
    type: 'Microsoft.Web/serverfarms',
    path: ['properties', 'reserved'],
    value: 'true',
    why: 'Flex Consumption is Linux only',
  },
  {
    type: 'Microsoft.Web/sites',
    path: ['kind'],
    value: "'functionapp,linux'",
    why: 'a Linux function app, as Flex Consumption requires',
  },
  {
    type: 'Microsoft.Web/sites',
    path: ['identity', 'type'],
    value: "'UserAssigned'",
    why: 'the app runs as the user-assigned identity only',
  },
  {
    type: 'Microsoft.Web/sites',
    path: ['properties', 'httpsOnly'],
    value: 'true',
    why: 'no plain HTTP',
  },
  {
    type: 'Microsoft.Web/sites',
    path: ['properties', 'keyVaultReferenceIdentity'],
    value: 'identityId',
    why: 'Key Vault references are resolved with the user-assigned identity',
  },
  {
    type: 'Microsoft.Web/sites',
    path: ['properties', 'functionAppConfig', 'runtime', 'name'],
    value: "'node'",
    why: 'a Node.js app',
  },
  {
    type: 'Microsoft.Web/sites',
    path: ['properties', 'functionAppConfig', 'runtime', 'version'],
    value: "'22'",
    why: 'Node 20 is out of support on Azure Functions',
  },
  {
    type: 'Microsoft.Web/sites',
    path: ['properties', 'functionAppConfig', 'deployment', 'storage', 'value'],
    value: "'${hostStorageAccount.properties.primaryEndpoints.blob}${deploymentStorageContainerName}'",
    why: 'the deployment package lives in the host account, not with Cairn data',
  },
  {
    type: 'Microsoft.Web/sites',
    path: ['properties', 'functionAppConfig', 'deployment', 'storage', 'authentication', 'type'],
    value: "'UserAssignedIdentity'",
    why: 'the package is fetched with the identity, not a connection string',
  },
  {
    type: 'Microsoft.Web/sites',
    path: [
      'properties',
      'functionAppConfig',
      'deployment',
      'storage',
      'authentication',
      'userAssignedIdentityResourceId',
    ],
    value: 'identityId',
    why: 'the identity the app runs as',
  },
];

/** Each {@link REQUIRED_SETTINGS} entry holds, written as a literal, on every resource of its type. */
export function requiredSettingViolations(root: Node): Violation[] {
  const found: Violation[] = [];
  for (const resource of declarations(root, 'resource_declaration')) {
    if (resource.existing) continue;
    for (const setting of REQUIRED_SETTINGS) {
      if (!sameType(resourceType(resource), setting.type)) continue;
      for (const body of resource.bodies) {
        const actual = propertyAt(body, setting.path)?.text;
        if (actual !== setting.value) {
          found.push(
            violation(
              'required-setting',
              resource.node,
              `${resource.symbol}: ${setting.path.join('.')} must be ${setting.value} (${setting.why}), found ${actual ?? 'nothing'}`,
            ),
          );
        }
      }
    }
  }
  return found;
}

/**
 * Every role assignment is named `guid(<scope>.id, principal, role...)`: the name is then the same
 * on every deployment (redeploying updates instead of failing with RoleAssignmentExists) and
 * differs across scopes, principals and roles.
 */
export function roleAssignmentNameViolations(root: Node): Violation[] {
  const found: Violation[] = [];
  for (const resource of declarations(root, 'resource_declaration')) {
    if (resource.existing || !sameType(resourceType(resource), 'Microsoft.Authorization/roleAssignments'))
      continue;
    for (const body of resource.bodies) {
      const name = objectProperty(body, 'name');
      if (name?.type !== 'call_expression' || calleeName(name) !== 'guid') {
        found.push(
          violation('role-assignment-name', resource.node, `${resource.symbol}: name must be guid(...)`),
        );
        continue;
      }
      const args = callArguments(name);
      if (args.length < 3) {
        found.push(
          violation(
            'role-assignment-name',
            resource.node,
            `${resource.symbol}: guid() needs scope, principal and role`,
          ),
        );
      }
      const scope = objectProperty(body, 'scope');
      if (scope?.type === 'identifier' && args[0]?.text !== `${scope.text}.id`) {
        found.push(
          violation(
            'role-assignment-name',
            resource.node,
            `${resource.symbol}: guid() must start with ${scope.text}.id`,
          ),
        );
      }
    }
  }
  return found;
}

// ---------------------------------------------------------------------------------------------
// App settings

export interface AppSetting {
  readonly name: string;
  /** The value when it is a plain string literal; undefined for expressions. */
  readonly literal: string | undefined;
  /** The source text of the value. */
  readonly expression: string;
}

/**
 * The app settings of every `Microsoft.Web/sites/config` resource named `appsettings` in the file
 * (the form this project uses: one resource that sets them all).
 */
export function appSettingsResources(root: Node): AppSetting[][] {
  return declarations(root, 'resource_declaration')
    .filter(
      (resource) => !resource.existing && sameType(resourceType(resource), 'Microsoft.Web/sites/config'),
    )
    .flatMap((resource) => resource.bodies)
    .filter((body) => stringLiteral(objectProperty(body, 'name')) === 'appsettings')
    .map((body) => {
      const properties = objectProperty(body, 'properties');
      return properties?.type === 'object'
        ? objectProperties(properties).map(([name, value]) => ({
            name,
            literal: stringLiteral(value),
            expression: value.text,
          }))
        : [];
    });
}

/**
 * The app settings cover what the app requires in Azure, and nothing that would weaken it:
 * `required` must all be set, `forbidden` must not be, and every `CAIRN_*` name must be a known one
 * (a misspelt setting is silently ignored by the app).
 */
export function appSettingViolations(
  settings: readonly AppSetting[],
  rules: { required: readonly string[]; forbidden: readonly string[]; known: readonly string[] },
): string[] {
  const names = new Set(settings.map((setting) => setting.name));
  return [
    ...rules.required.filter((name) => !names.has(name)).map((name) => `${name} is required but not set`),
    ...rules.forbidden.filter((name) => names.has(name)).map((name) => `${name} must not be set in Azure`),
    ...[...names]
      .filter((name) => name.startsWith('CAIRN_') && !rules.known.includes(name))
      .map((name) => `${name} is not a setting the app reads`),
  ];
}

/**
 * Each named app setting has exactly the expected value expression (source text). This is how the
 * templates are held to pointing each setting at the right resource: an endpoint of the host
 * account and one of the data account are both strings, and the compiler accepts either.
 */
export function settingExpressionViolations(
  settings: readonly AppSetting[],
  expected: Readonly<Record<string, string>>,
): string[] {
  const found: string[] = [];
  for (const [name, expression] of Object.entries(expected)) {
    const setting = settings.find((candidate) => candidate.name === name);
    if (setting === undefined) found.push(`${name} is not set`);
    else if (setting.expression !== expression) {
      found.push(`${name} must be ${expression}, found ${setting.expression}`);
    }
  }
  return found;
}

// ---------------------------------------------------------------------------------------------
// Which resource a symbol stands for, and who holds which role where

/** The `name:` expression (source text) of every `existing` resource of the file, by symbol. */
export function existingResourceNames(root: Node): Map<string, string> {
  const names = new Map<string, string>();
  for (const resource of declarations(root, 'resource_declaration')) {
    if (!resource.existing) continue;
    const name = resource.bodies.map((body) => objectProperty(body, 'name')?.text).find(Boolean);
    if (name !== undefined) names.set(resource.symbol, name);
  }
  return names;
}

function variableValue(root: Node, name: string): Node | undefined {
  const declaration = namedChildren(root).find(
    (node) => node.type === 'variable_declaration' && namedChildren(node)[0]?.text === name,
  );
  return declaration === undefined ? undefined : namedChildren(declaration).at(-1);
}

/**
 * The string values an expression stands for, following the forms the templates use for role ids:
 * a literal, an array of them, a variable, or a property of an object variable (`roles.x`).
 * Anything else yields nothing, so a rule built on it fails rather than guesses.
 */
function resolveStrings(root: Node, node: Node | undefined): string[] {
  if (node === undefined) return [];
  const literal = stringLiteral(node);
  if (literal !== undefined) return [literal];
  if (node.type === 'array') return namedChildren(node).flatMap((element) => resolveStrings(root, element));
  if (node.type === 'identifier') return resolveStrings(root, variableValue(root, node.text));
  if (node.type === 'member_expression') {
    const object = node.childForFieldName('object');
    const property = node.childForFieldName('property')?.text;
    if (object?.type !== 'identifier' || property === undefined) return [];
    return resolveStrings(root, objectProperty(variableValue(root, object.text), property));
  }
  return [];
}

export interface RoleGrant {
  /** The symbol of the role assignment resource. */
  readonly resource: string;
  /** The source text of its `scope:` (a resource symbol). */
  readonly scope: string;
  /** The source text of its `principalId:`. */
  readonly principal: string;
  /** The role definition ids it grants (one per loop item for a resource loop). */
  readonly roleIds: readonly string[];
}

/**
 * Every role assignment of the file: its scope, principal and role definition ids. For a resource
 * loop the ids come from the collection it walks; otherwise from the last argument of
 * `subscriptionResourceId(...)` in `roleDefinitionId`.
 */
export function roleGrants(root: Node): RoleGrant[] {
  return declarations(root, 'resource_declaration')
    .filter(
      (resource) =>
        !resource.existing && sameType(resourceType(resource), 'Microsoft.Authorization/roleAssignments'),
    )
    .flatMap((resource) => {
      const value = namedChildren(resource.node).at(-1);
      const loop = value?.type === 'for_statement' ? value : undefined;
      return resource.bodies.map((body): RoleGrant => {
        let roleIds: string[];
        if (loop === undefined) {
          const definition = propertyAt(body, ['properties', 'roleDefinitionId']);
          roleIds =
            definition?.type === 'call_expression'
              ? resolveStrings(root, callArguments(definition).at(-1))
              : [];
        } else {
          roleIds = resolveStrings(root, namedChildren(loop)[1]);
        }
        return {
          resource: resource.symbol,
          scope: objectProperty(body, 'scope')?.text ?? '',
          principal: propertyAt(body, ['properties', 'principalId'])?.text ?? '',
          roleIds,
        };
      });
    });
}

/**
 * Each `[module, param, expression]` holds: the module declaration passes exactly that expression
 * (source text) for the parameter. This keeps main.bicep from wiring the host account where the
 * data account belongs: both are storage account names, so the compiler accepts the swap.
 */
export function moduleParameterViolations(
  root: Node,
  expected: readonly (readonly [module: string, param: string, expression: string])[],
): string[] {
  // Arrays span lines; compare them with each run of white space as one space.
  const normal = (text: string | undefined) => text?.replace(/\s+/g, ' ');
  return expected.flatMap(([module, param, expression]) => {
    const actual = normal(moduleParameterValue(root, module, param)?.text);
    return actual === normal(expression)
      ? []
      : [`module ${module}: ${param} must be ${normal(expression)}, found ${actual ?? 'nothing'}`];
  });
}

// ---------------------------------------------------------------------------------------------
// Parameters file

/**
 * A deployment parameters file (`main.parameters.json`) names only parameters the template
 * declares and gives every Required one.
 */
export function parametersFileViolations(root: Node, parametersJson: string): string[] {
  const file = JSON.parse(parametersJson) as { parameters?: Record<string, unknown> };
  const given = new Set(Object.keys(file.parameters ?? {}));
  const declared = parameters(root);
  const declaredNames = new Set(declared.map((parameter) => parameter.name));
  return [
    ...declared
      .filter((parameter) => !parameter.hasDefault && !parameter.nullable && !given.has(parameter.name))
      .map((parameter) => `required param ${parameter.name} is not in the parameters file`),
    ...[...given]
      .filter((name) => !declaredNames.has(name))
      .map((name) => `the template has no param ${name}`),
  ];
}

/**
 * No value in a deployment parameters file is a secret: the same text checks as for templates, and
 * no literal value for a parameter named like a secret. azd placeholders (`${NAME}`) are fine: they
 * are filled in from the azd environment at deployment time.
 */
export function parametersFileSecretViolations(parametersJson: string): string[] {
  const file = JSON.parse(parametersJson) as { parameters?: Record<string, { value?: unknown }> };
  const found: string[] = [];
  for (const [name, { value }] of Object.entries(file.parameters ?? {})) {
    if (typeof value !== 'string') continue;
    for (const [what, pattern] of SECRET_TEXT) {
      if (pattern.test(value)) found.push(`${name} holds a ${what}`);
    }
    if (looksLikeKeyMaterial(value)) found.push(`${name} looks like key material`);
    if (SECRET_PROPERTY.test(name) && value !== '' && !/^\$\{[A-Z0-9_]+(?:=[^}]*)?\}$/.test(value)) {
      found.push(`${name} is given a literal value`);
    }
  }
  return found;
}

// ---------------------------------------------------------------------------------------------
// Lookups for tests that follow a value across files

/** How many resources of a type (without API version) the file deploys (`existing` ones excluded). */
export function countResources(root: Node, type: string): number {
  return declarations(root, 'resource_declaration').filter(
    (resource) => !resource.existing && sameType(resourceType(resource), type),
  ).length;
}

/** The default value of a top-level parameter, if it has one. */
export function parameterDefault(root: Node, name: string): Node | undefined {
  return parameters(root).find((parameter) => parameter.name === name)?.defaultValue;
}

/** Whether the file declares a top-level parameter of this name. */
export function declaresParameter(root: Node, name: string): boolean {
  return parameters(root).some((parameter) => parameter.name === name);
}

/** The value a module declaration passes for one of its parameters. */
export function moduleParameterValue(root: Node, moduleSymbol: string, name: string): Node | undefined {
  const module = declarations(root, 'module_declaration').find(
    (candidate) => candidate.symbol === moduleSymbol,
  );
  return module?.bodies
    .map((body) => propertyAt(body, ['params', name]))
    .find((value) => value !== undefined);
}
