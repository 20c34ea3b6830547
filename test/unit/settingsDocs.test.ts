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

  it('a configuration table of the docs (README.md or infra/README.md) has a row for every setting', () => {
    const docs = ['README.md', 'infra/README.md'].map((file) => readFileSync(file, 'utf8')).join('\n');
    for (const name of names) expect(docs, name).toMatch(new RegExp(`^\\|\\s*\`${name}\`\\s*\\|`, 'm'));
  });
});
