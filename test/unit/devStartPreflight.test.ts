import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

import { describe, expect, it } from 'vitest';

import { AZURITE_ACCOUNT_KEY } from '../../dev/azurite';
import {
  checkSettings,
  foreignEmulatorSetting,
  LOCK_FILE,
  parsePort,
  takeStartLock,
} from '../../dev/preflight';
import { tempDir } from '../support/cleanup';

/** What `npm start` checks before it starts anything (dev/preflight.ts). */
const own = {
  blobEndpoint: 'http://127.0.0.1:41000/devstoreaccount1',
  queueEndpoint: 'http://127.0.0.1:41001/devstoreaccount1',
  tableEndpoint: 'http://127.0.0.1:41002/devstoreaccount1',
};

describe('PORT', () => {
  it.each(['abc', '70000', '-1', '7071.5', '1e3', '0x10'])('refuses %s, naming PORT', (value) => {
    expect(() => parsePort(value)).toThrow(/^PORT must be a port number from 1 to 65535/);
  });

  it('takes 0-65535, defaults to 7071', () => {
    expect(parsePort(undefined)).toBe(7071);
    expect(parsePort('')).toBe(7071);
    expect(parsePort('0')).toBe(0);
    expect(parsePort(' 7072 ')).toBe(7072);
    expect(parsePort('65535')).toBe(65535);
  });
});

describe('a setting naming another emulator', () => {
  it('passes empty settings, this Azurite (under any loopback name) and real accounts', () => {
    expect(foreignEmulatorSetting({}, own)).toBeUndefined();
    expect(
      foreignEmulatorSetting(
        {
          CAIRN_BLOB_ENDPOINT: 'http://localhost:41000/devstoreaccount1/',
          CAIRN_QUEUE_ENDPOINT: '',
          CAIRN_TABLE_ENDPOINT: 'https://acct.table.core.windows.net',
          AzureWebJobsStorage: 'UseDevelopmentStorage=true',
        },
        own,
      ),
    ).toBeUndefined();
  });

  it.each([
    ['CAIRN_BLOB_ENDPOINT', 'http://127.0.0.1:10000/devstoreaccount1'],
    ['CAIRN_QUEUE_ENDPOINT', 'http://localhost:10001/devstoreaccount1'],
    ['CAIRN_TABLE_ENDPOINT', 'http://127.0.0.1:41000/devstoreaccount1'], // this Azurite's blob port
    ['CAIRN_BLOB_ENDPOINT', 'http://azurite:10000/devstoreaccount1'],
  ])('names %s = %s', (setting, value) => {
    expect(foreignEmulatorSetting({ [setting]: value }, own)).toEqual({ setting, value });
  });

  it('names AzureWebJobsStorage by its endpoint, never its key', () => {
    const found = foreignEmulatorSetting(
      {
        AzureWebJobsStorage: `DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=${AZURITE_ACCOUNT_KEY};BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1;`,
      },
      own,
    );
    expect(found).toEqual({
      setting: 'AzureWebJobsStorage',
      value: 'http://127.0.0.1:10000/devstoreaccount1',
    });
  });
});

describe('local.settings.sample.json under npm start', () => {
  const sample = (
    JSON.parse(readFileSync('local.settings.sample.json', 'utf8')) as { Values: Record<string, string> }
  ).Values;

  it('names no emulator endpoint (empty: the embedded Azurite)', () => {
    for (const name of ['CAIRN_BLOB_ENDPOINT', 'CAIRN_QUEUE_ENDPOINT', 'CAIRN_TABLE_ENDPOINT']) {
      expect(sample[name], name).toBe('');
    }
    expect(foreignEmulatorSetting(sample, own)).toBeUndefined();
  });

  it('passes the settings check as it is', () => {
    expect(() => checkSettings({ ...sample }, tempDir('preflight-sample'))).not.toThrow();
  });

  it('a bad setting is named before anything starts', () => {
    expect(() => checkSettings({ ...sample, CAIRN_LOG_LEVEL: 'loud' }, tempDir('preflight-bad'))).toThrow(
      /^CAIRN_LOG_LEVEL: /,
    );
  });
});

describe('the npm start lock', () => {
  it('is taken once per folder, names its holder, and is released', () => {
    const dir = tempDir('lock');
    const lock = takeStartLock(dir, 7071);
    const file = path.join(dir, LOCK_FILE);
    expect(JSON.parse(readFileSync(file, 'utf8'))).toEqual({ pid: process.pid, port: 7071 });
    lock.update(40123);
    expect(JSON.parse(readFileSync(file, 'utf8'))).toEqual({ pid: process.pid, port: 40123 });
    // Another live process holds it: refused, naming its pid and port.
    writeFileSync(file, JSON.stringify({ pid: process.ppid, port: 7090 }));
    expect(() => takeStartLock(dir, 7072)).toThrow(
      new RegExp(`already runs in this folder \\(pid ${process.ppid}, port 7090\\)`),
    );
    // Not ours any more: release leaves it.
    lock.release();
    expect(JSON.parse(readFileSync(file, 'utf8'))).toEqual({ pid: process.ppid, port: 7090 });
  });

  it('takes over the lock of a process that is gone', () => {
    const dir = tempDir('lock-stale');
    const gone = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))']);
    const file = path.join(dir, LOCK_FILE);
    writeFileSync(file, JSON.stringify({ pid: Number(gone.stdout.toString()), port: 7071 }));
    const lock = takeStartLock(dir, 7073);
    expect(JSON.parse(readFileSync(file, 'utf8'))).toEqual({ pid: process.pid, port: 7073 });
    lock.release();
    expect(() => readFileSync(file)).toThrow(/ENOENT/);
  });
});
