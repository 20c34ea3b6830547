import { readFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';

import { ArchiveClient } from '@cairn-state/client';
import { afterEach, describe, expect, it } from 'vitest';

import { tempDir } from '../support/cleanup';
import { startNpmStart, stopNpmStarts } from '../support/npmStart';

/**
 * Session archives work under `npm start` with nothing configured by hand: on embedded defaults
 * (bytes and the session index under `.cairn/data`) and with only CAIRN_BLOB_CONTAINER set (bytes in
 * the embedded Azurite's blob service, the index in its table service).
 */
afterEach(stopNpmStarts);

describe.each([
  ['embedded defaults', {}],
  ['only CAIRN_BLOB_CONTAINER set', { CAIRN_BLOB_CONTAINER: 'cairn' }],
] as const)('session archives under npm start with %s', (_name, env) => {
  it('publishes, lists and restores a checkpoint', async () => {
    const cwd = tempDir('start-sessions');
    const { url } = await startNpmStart(cwd, env);
    const key = readFileSync(path.join(cwd, '.cairn', 'dev-api-key'), 'utf8').trim();
    const session = path.join(cwd, 'session');
    await mkdir(path.join(session, 'native'), { recursive: true });
    await writeFile(path.join(session, 'events.jsonl'), '{"turn":1}\n');
    await writeFile(path.join(session, 'native', 'state.json'), '{}');
    const archive = new ArchiveClient({ url, token: key });
    const published = await archive.publishCheckpoint(session, 's1');
    const list = await fetch(`${url}/api/sessions`, { headers: { authorization: `Bearer ${key}` } });
    expect(list.status).toBe(200);
    expect(await list.json()).toMatchObject({
      sessions: [{ id: 's1', checkpointId: published.checkpointId }],
    });
    const restored = path.join(cwd, 'restored');
    await archive.restoreCheckpoint('s1', restored);
    expect(readFileSync(path.join(restored, 'events.jsonl'), 'utf8')).toBe('{"turn":1}\n');
  });
});
