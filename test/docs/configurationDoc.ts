import { SETTINGS } from '../../shared/config';

/**
 * `docs/configuration.md`, rendered from `SETTINGS` in `shared/config.ts`, the one list of settings
 * the app reads: `npm run docs` writes it, and a test checks it is current.
 */
export function renderConfigurationDoc(): string {
  const rows = Object.entries(SETTINGS).map(([name, doc]) => {
    const required = 'requiredIn' in doc ? `with the ${doc.requiredIn} backend` : '';
    return `| \`${name}\` | ${required} | ${doc.description.replaceAll('|', '\\|')} |`;
  });
  return [
    '# Configuration',
    '',
    '<!-- Rendered by `npm run docs` from SETTINGS in shared/config.ts; do not edit by hand. -->',
    '',
    'Every setting is read and validated once, at start-up, by `shared/config.ts`. A missing or invalid',
    'setting stops the app with a message that names it; there is no silent fallback (a',
    'half-configured fleet instance on an empty local store would replay old messages).',
    '`local.settings.sample.json` lists every setting, the storage endpoints empty (under `npm start`:',
    "its own Azurite; under `func start` fill them in with your Azurite's); under",
    '`npm start` and `func start` settings come from the environment and from `local.settings.json`',
    '(`Values`; the environment wins). At least one credential kind must be configured',
    '(`CAIRN_API_KEYS` or the three `CAIRN_AUTH_*` URLs).',
    '',
    '| setting | required | meaning |',
    '| --- | --- | --- |',
    ...rows,
    '',
    'Read by `npm start` only (development): `PORT` (default 7071), the port of the local runtime;',
    '`CAIRN_LOCAL_RUNTIME=1` uses the local runtime even when Azure Functions Core Tools are installed.',
    '',
  ].join('\n');
}
