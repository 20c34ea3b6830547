import { readFileSync } from 'node:fs';

import { format, resolveConfig } from 'prettier';
import { describe, expect, it } from 'vitest';

import { SETTINGS } from '../../shared/config';
import { renderConfigurationDoc } from '../docs/configurationDoc';

/** One source of truth: every setting the configuration module reads is documented and sampled. */
describe('settings documentation', () => {
  const names = Object.keys(SETTINGS);

  it('local.settings.sample.json lists every setting', () => {
    const sample = JSON.parse(readFileSync('local.settings.sample.json', 'utf8')) as {
      Values: Record<string, string>;
    };
    for (const name of names) expect(Object.keys(sample.Values), name).toContain(name);
  });

  it('docs/configuration.md is rendered from SETTINGS as it is now (npm run docs renders it)', async () => {
    const filepath = 'docs/configuration.md';
    const expected = await format(renderConfigurationDoc(), { ...(await resolveConfig(filepath)), filepath });
    expect(readFileSync('docs/configuration.md', 'utf8')).toBe(expected);
    for (const name of names) expect(expected, name).toMatch(new RegExp(`^\\|\\s*\`${name}\`\\s*\\|`, 'm'));
  });
});
