/**
 * The architecture, checked on every import (`npm run lint`; docs/development.md, "Layers"):
 * no import cycles (type-only imports count: a cycle of types is a cycle of design), storage
 * implementations and the Azure SDKs only where the composition root wires them, the client free of
 * server code, and jobs that take per-domain parts instead of importing the domains.
 */

/** The domains: each owns its data and gives the jobs its parts (retention, verify, rewrap, repair). */
const DOMAINS = '^shared/(archive|audit|coordination|crypto|memory|migration|snapshots|threads|tenants)/';

/**
 * The protocol: the HTTP routes declared as data (field rules, the OpenAPI generator) and the formats
 * both sides check (identifiers, manifests, the audit chain, signatures, canonical JSON, error codes).
 * It is the package @cairn-state/protocol: it depends on zod, canonicalize and p-map alone, and the
 * domain, the functions and the client packages import it, never the reverse.
 */
const PROTOCOL = '^shared/protocol/';

/** The composition root and what may wire implementations as it does: development and test code. */
const COMPOSERS = ['^shared/services[.]ts$', '^dev/', '^test/'];

module.exports = {
  forbidden: [
    {
      name: 'protocol-stands-alone',
      comment:
        'shared/protocol/ imports only itself, Node and its three libraries (zod, canonicalize, p-map): ' +
        'the domain imports its field rules from there, not the reverse, and it is published on its own.',
      severity: 'error',
      from: { path: PROTOCOL },
      to: {
        dependencyTypesNot: ['core'],
        pathNot: [PROTOCOL, '(^|/)node_modules/(zod|canonicalize|p-map)/'],
      },
    },
    {
      name: 'no-cycles',
      comment: 'Import cycles (type-only imports included): move the shared part to a module both import.',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    {
      name: 'storage-implementations-in-the-composition-root',
      comment:
        'Only the composition root (shared/services.ts; dev/ and test/ compose as it does) picks a ' +
        'storage implementation; everything else takes the contracts of shared/storage/*.ts.',
      severity: 'error',
      from: { pathNot: [...COMPOSERS, '^shared/storage/(azure|local)/'] },
      to: { path: '^shared/storage/(azure|local)/' },
    },
    {
      name: 'azure-sdks-in-storage-azure',
      comment:
        'The Azure storage and identity SDKs are used by shared/storage/azure/ alone (the composition ' +
        'root names the Blob client type it passes on; dev/ and test/ run Azurite).',
      severity: 'error',
      from: { pathNot: [...COMPOSERS, '^shared/storage/azure/'] },
      to: { path: 'node_modules/@azure/(?!functions/)' },
    },
    {
      name: 'functions-sdk-in-the-triggers',
      comment:
        'The Functions host SDKs belong to the triggers (functions/) and the local runtime (dev/host/).',
      severity: 'error',
      from: { pathNot: ['^functions/', '^dev/host/', '^test/'] },
      to: { path: 'node_modules/(@azure/functions|durable-functions)/' },
    },
    {
      name: 'shared-is-the-server-core',
      comment: 'shared/ imports nothing of the triggers, the client, development or test code.',
      severity: 'error',
      from: { path: '^shared/' },
      to: { path: '^(functions|client|dev|test)/' },
    },
    {
      name: 'functions-import-shared-only',
      comment: 'functions/ imports no client, development or test code.',
      severity: 'error',
      from: { path: '^functions/' },
      to: { path: '^(client|dev|test)/' },
    },
    {
      name: 'client-imports-no-server-code',
      comment: 'The client packages talk HTTP: of the server they import the protocol package alone.',
      severity: 'error',
      from: { path: '^client/' },
      to: { path: '^(shared|functions|dev|test)/', pathNot: [PROTOCOL] },
    },
    {
      name: 'client-reaches-no-server-code',
      comment:
        'What the client imports of shared/ reaches no composition, configuration, storage ' +
        'implementation or Azure SDK.',
      severity: 'error',
      from: { path: '^client/' },
      to: {
        path: [
          '^shared/(services|config|readiness)[.]ts$',
          '^shared/storage/(azure|local)/',
          'node_modules/@azure/',
          'node_modules/durable-functions/',
        ],
        reachable: true,
      },
    },
    {
      name: 'domains-import-no-job',
      comment:
        'Jobs (shared/jobs/) compose the parts the domains give them; a domain never imports a job ' +
        '(it imports the toolkit of shared/retention/ and the contracts of the job it takes part in).',
      severity: 'error',
      from: { path: [DOMAINS, '^shared/(retention|storage)/'] },
      to: { path: '^shared/jobs/' },
    },
    {
      name: 'jobs-take-domain-parts',
      comment:
        'A job takes per-domain parts from the composition root instead of importing the domains ' +
        '(the audit contracts it checks against excepted).',
      severity: 'error',
      from: { path: '^shared/jobs/' },
      to: { path: '^shared/(archive|coordination|crypto|memory|migration|snapshots|threads|mcp)/' },
    },
    {
      name: 'retention-toolkit-below-the-domains',
      comment:
        'shared/retention/ is the toolkit the domains and the jobs share (budgets, deletions, reports, ' +
        'run state, policies, the parts contracts): it imports no domain.',
      severity: 'error',
      from: { path: '^shared/retention/' },
      to: { path: '^shared/(archive|coordination|crypto|memory|migration|snapshots|threads|mcp|jobs)/' },
    },
    {
      name: 'storage-contracts-below-the-domains',
      comment: 'The storage contracts (shared/storage/*.ts) import no domain and no job.',
      severity: 'error',
      from: { path: '^shared/storage/[^/]+$' },
      to: {
        path: '^shared/(archive|audit|coordination|crypto|memory|migration|snapshots|threads|mcp|jobs|retention)/',
      },
    },
    {
      name: 'storage-implementations-import-no-job',
      comment:
        'A storage implementation implements a contract (of shared/storage/, or a store contract of a domain ' +
        'such as memory/memoryStore.ts): it imports no job and no job toolkit.',
      severity: 'error',
      from: { path: '^shared/storage/(azure|local)/' },
      to: { path: '^shared/(jobs|retention)/' },
    },
  ],
  options: {
    // Type-only imports count: the layers are about what a module knows, not what survives compilation.
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    doNotFollow: { path: 'node_modules' },
    exclude: {
      path: '^(dist|node_modules|coverage)/|^(shared/protocol|client/[^/]+)/(dist|[.]build)/|[.]cairn/',
    },
    // `#shared/*` (package.json imports) resolves to dist/; tsconfig paths map it to shared/.
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default'],
    },
    reporterOptions: { text: { highlightFocused: true } },
  },
};
