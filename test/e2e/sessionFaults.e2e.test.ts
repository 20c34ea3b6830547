import { randomBytes } from 'node:crypto';

import { describe, expect, it } from 'vitest';

import { BLOCK_BYTES } from '../../shared/protocol/archive/identifiers';
import { type Backend, backendSettings } from '../support/app';
import { splitFile } from '../support/archiveTestKit';
import { appOnOwnStorage, expectStorageUnavailable } from '../support/faults';
import { sessionIndexSettings } from '../support/tables';

/**
 * Storage faults on the session routes: with the app's own Azurite stopped (Blob objects and the
 * Table index on the Blob backend; the index on the local backend), every §4 route answers 503
 * storage_unavailable with Retry-After, never 404, within 10 s; the app serves again once Azurite
 * is back on the same ports.
 */
describe.each<Backend>(['blob', 'local'])('session archive faults on the %s backend', (backend) => {
  const suite = appOnOwnStorage((storage) => ({
    ...backendSettings(backend, storage.blobEndpoint),
    ...sessionIndexSettings(storage.tableEndpoint),
  }));

  it('answers 503, never 404, while the storage is down, and serves again when it is back', async () => {
    const { objects, file } = splitFile('events.jsonl', randomBytes(BLOCK_BYTES + 10), 'g1', 'c1');
    for (const [key, bytes] of objects) {
      expect(
        (await suite.call(`/api/sessions/known/objects/${key}`, { method: 'PUT', body: bytes })).status,
      ).toBe(201);
    }
    const body = JSON.stringify({ checkpointId: 'c1', parent: null, files: [file] });
    expect((await suite.call('/api/sessions/known/checkpoints', { method: 'POST', body })).status).toBe(201);
    await suite.stopStorage();

    const requests: [string, RequestInit][] = [
      ['/api/sessions', { method: 'GET' }],
      ['/api/sessions/known', { method: 'GET' }],
      ['/api/sessions/unknown', { method: 'GET' }],
      ['/api/sessions/unknown/objects/blocks/g1/0', { method: 'GET' }],
      ['/api/sessions/unknown/objects/blocks/g1/0', { method: 'PUT', body: randomBytes(BLOCK_BYTES) }],
      ['/api/sessions/unknown/checkpoints', { method: 'POST', body }],
      ['/api/sessions/unknown/checkpoints/latest', { method: 'GET' }],
      ['/api/sessions/unknown/checkpoints/c1/files/events.jsonl', { method: 'GET' }],
      ['/api/sessions/known/checkpoints', { method: 'POST', body }],
    ];
    if (backend === 'blob') {
      // The owner of `known` is remembered by the app; its bytes are on the stopped Blob service.
      requests.push(
        ['/api/sessions/known/objects/blocks/g1/0', { method: 'GET' }],
        ['/api/sessions/known/objects/blocks/g1/1', { method: 'PUT', body: randomBytes(BLOCK_BYTES) }],
        ['/api/sessions/known/checkpoints/latest', { method: 'GET' }],
        ['/api/sessions/known/checkpoints/c1', { method: 'GET' }],
        ['/api/sessions/known/checkpoints/c1/files/events.jsonl', { method: 'GET' }],
      );
    }
    for (const [path, init] of requests) await expectStorageUnavailable(suite.call, path, init);

    await suite.restartStorage();
    // The restarted emulator is empty (in memory): the app makes its table and container again.
    const again = splitFile('events.jsonl', randomBytes(100), 'g1', 'c1');
    for (const [key, bytes] of again.objects) {
      expect(
        (await suite.call(`/api/sessions/fresh/objects/${key}`, { method: 'PUT', body: bytes })).status,
      ).toBe(201);
    }
    const published = await suite.call('/api/sessions/fresh/checkpoints', {
      method: 'POST',
      body: JSON.stringify({ checkpointId: 'c1', parent: null, files: [again.file] }),
    });
    expect(published.status).toBe(201);
    expect((await suite.call('/api/sessions/fresh')).status).toBe(200);
  });
});
