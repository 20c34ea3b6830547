import { readFileSync } from 'node:fs';

import { describe, expect, it } from 'vitest';

import { SETTINGS } from '../../shared/config';

/** One source of truth: every setting the configuration module reads is documented and sampled. */
describe('settings documentation', () => {
  const names = Object.keys(SETTINGS);

  it('local.settings.sample.json lists every setting', () => {
    const sample = JSON.parse(readFileSync('local.settings.sample.json', 'utf8')) as {
      Values: Record<string, string>;
    };
    for (const name of names) expect(Object.keys(sample.Values), name).toContain(name);
  });

  it('the README configuration table has a row for every setting', () => {
    const readme = readFileSync('README.md', 'utf8');
    for (const name of names) expect(readme, name).toMatch(new RegExp(`^\\|\\s*\`${name}\`\\s*\\|`, 'm'));
  });
});
