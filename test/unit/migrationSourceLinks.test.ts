import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';

import { beforeAll, describe, expect, it } from 'vitest';

import { loadRegistrations, type Registration } from '../../dev/host/registrations';
import { checkSourceRoot } from '../../shared/migration/jobInput';
import { tempDir } from '../support/cleanup';

/**
 * The migration activities check a source root's real folder themselves: their input may come
 * from anyone who can reach the durable runtime, not only from the route (which checks it too).
 */

let allowed: string;
let activities: Map<string, Registration>;

beforeAll(() => {
  const base = tempDir('migration-links');
  allowed = path.join(base, 'allowed');
  const outside = path.join(base, 'outside');
  mkdirSync(allowed, { recursive: true });
  mkdirSync(outside, { recursive: true });
  writeFileSync(path.join(outside, 'secret.txt'), 'not allowed');
  symlinkSync(outside, path.join(allowed, 'link'), 'dir');
  process.env['CAIRN_API_KEYS'] = `ops:${'0'.repeat(64)}:admin`;
  process.env['CAIRN_MIGRATION_SOURCE_ROOTS'] = allowed;
  process.env['CAIRN_DATA_DIR'] = path.join(base, 'data');
  const registrations = loadRegistrations(path.resolve('dist/functions/migrations.js'));
  activities = new Map(
    registrations
      .filter((registration) => registration.trigger.type === 'activityTrigger')
      .map((registration) => [registration.name, registration]),
  );
});

function activity(name: string): Registration {
  const found = activities.get(name);
  if (found === undefined) throw new Error(`no activity ${name}`);
  return found;
}

describe('migration activities and symbolic links', () => {
  it('refuse a root that is a link in an allowed folder to a folder outside it, before reading it', async () => {
    const source = { root: path.join(allowed, 'link'), prefix: '' };
    await expect(
      Promise.resolve(
        activity('migrationListSourcePage').handler({ tenant: 't1', source, after: '', limit: 10 }, {}),
      ),
    ).rejects.toThrow(/source\.root/);
    await expect(
      Promise.resolve(
        activity('migrationCopyFiles').handler(
          { tenant: 't1', source, batch: { after: '', through: 'secret.txt', count: 1 }, dryRun: true },
          {},
        ),
      ),
    ).rejects.toThrow(/source\.root/);
  });
});

describe('migration source roots by their path', () => {
  it('takes a folder of an allowed root whose name starts with two dots, and refuses the parent', () => {
    expect(checkSourceRoot('root', '/data/..hidden', ['/data'])).toBe('/data/..hidden');
    expect(checkSourceRoot('root', '/data/a/...', ['/data'])).toBe('/data/a/...');
    expect(() => checkSourceRoot('root', '/data/..', ['/data'])).toThrow(/CAIRN_MIGRATION_SOURCE_ROOTS/);
    expect(() => checkSourceRoot('root', '/data/../etc', ['/data'])).toThrow(/CAIRN_MIGRATION_SOURCE_ROOTS/);
    expect(() => checkSourceRoot('root', '/database', ['/data'])).toThrow(/CAIRN_MIGRATION_SOURCE_ROOTS/);
  });
});
