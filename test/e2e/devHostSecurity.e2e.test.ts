import { existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import {
  apiKeysSetting,
  backendSettings,
  client,
  newTenant,
  rawRequest,
  type RunningApp,
  startApp,
} from '../support/app';
import { tempDir } from '../support/cleanup';

/**
 * The local runtime keeps its own endpoints (the durable webhooks, the admin API) to callers with
 * the host key, serves loopback `Host` names only, bounds the bodies it reads, answers 400 for a
 * path that does not decode, and lets a client that is still sending an oversize body read its
 * 413. The orchestrations check their own input too, whoever starts them.
 */

interface Sent {
  readonly status: number;
  /** The answer's head, lower-cased. */
  readonly head: string;
  readonly body: string;
  /** The client wrote its whole body to the connection. */
  readonly sentWhole: boolean;
  readonly error?: string;
}

/**
 * A client that streams its whole body whatever it is answered (as `curl` and many others do): the
 * request over a plain socket, `size` bytes in 64 KiB writes (declared by Content-Length unless
 * `chunked`), the answer read until the server closes.
 */
function streamBody(
  url: string,
  pathname: string,
  size: number,
  options: { method?: string; headers?: Record<string, string>; chunked?: boolean } = {},
): Promise<Sent> {
  const { hostname, port } = new URL(url);
  const chunked = options.chunked === true;
  const headers = {
    host: `${hostname}:${port}`,
    ...(chunked ? { 'transfer-encoding': 'chunked' } : { 'content-length': String(size) }),
    ...options.headers,
  };
  const head =
    `${options.method ?? 'PUT'} ${pathname} HTTP/1.1\r\n` +
    Object.entries(headers)
      .map(([name, value]) => `${name}: ${value}\r\n`)
      .join('') +
    '\r\n';
  return new Promise((resolve) => {
    const socket = net.connect(Number(port), hostname);
    const received: Buffer[] = [];
    let sentWhole = false;
    let error: string | undefined;
    socket.on('data', (chunk: Buffer) => received.push(chunk));
    socket.on('error', (cause: NodeJS.ErrnoException) => (error = cause.code ?? cause.message));
    socket.on('close', () => {
      const text = Buffer.concat(received).toString('latin1');
      const split = text.indexOf('\r\n\r\n');
      const answerHead = (split < 0 ? text : text.slice(0, split)).toLowerCase();
      resolve({
        status: Number(/^http\/1\.1 (\d{3})/.exec(answerHead)?.[1] ?? 0),
        head: answerHead,
        body: split < 0 ? '' : text.slice(split + 4),
        sentWhole,
        ...(error === undefined ? {} : { error }),
      });
    });
    const piece = Buffer.alloc(64 * 1024, 0x61);
    let sent = 0;
    const frame = (bytes: Buffer) =>
      chunked
        ? Buffer.concat([Buffer.from(`${bytes.length.toString(16)}\r\n`), bytes, Buffer.from('\r\n')])
        : bytes;
    const pump = () => {
      while (sent < size) {
        const next = piece.subarray(0, Math.min(piece.length, size - sent));
        sent += next.length;
        if (!socket.write(frame(next))) {
          socket.once('drain', pump);
          return;
        }
      }
      socket.end(chunked ? '0\r\n\r\n' : '', () => (sentWhole = error === undefined));
    };
    socket.write(head);
    pump();
  });
}

/** The error code of an answer's JSON body (a chunked one is taken as its one chunk). */
function bodyCode(answer: Sent): string | undefined {
  const json = answer.head.includes('transfer-encoding: chunked')
    ? answer.body.slice(answer.body.indexOf('\r\n') + 2, answer.body.lastIndexOf('}') + 1)
    : answer.body;
  return errorCode(json);
}

function errorCode(body: string): string | undefined {
  return (JSON.parse(body) as { error?: { code?: string } }).error?.code;
}

describe('the local runtime’s own endpoints', () => {
  const ops = newTenant('ops', true);
  const dataDir = tempDir('devhost-data');
  const allowed = tempDir('devhost-sources');
  const outside = tempDir('devhost-outside');
  let app: RunningApp;

  beforeAll(async () => {
    mkdirSync(path.join(allowed, 'notes'), { recursive: true });
    writeFileSync(path.join(allowed, 'notes', 'a.txt'), 'inside');
    writeFileSync(path.join(outside, 'secret.txt'), 'outside');
    app = await startApp({
      CAIRN_API_KEYS: apiKeysSetting([ops]),
      CAIRN_MIGRATION_SOURCE_ROOTS: allowed,
      ...backendSettings('local', ''),
      CAIRN_DATA_DIR: dataDir,
    });
  });
  afterAll(async () => app.stop());

  const webhook = (name: string) => `/runtime/webhooks/durabletask/orchestrators/${name}`;

  /** Starts an orchestration through the webhook with the host key; resolves with its final status. */
  async function runOrchestration(
    name: string,
    input: unknown,
  ): Promise<{ runtimeStatus: string; output: unknown }> {
    const started = await fetch(`${app.url}${webhook(name)}`, {
      method: 'POST',
      headers: { 'x-functions-key': app.hostKey, 'content-type': 'application/json' },
      body: JSON.stringify(input),
    });
    expect(started.status).toBe(202);
    const { id } = (await started.json()) as { id: string };
    for (let poll = 0; poll < 300; poll++) {
      const response = await fetch(
        `${app.url}/runtime/webhooks/durabletask/instances/${id}?code=${encodeURIComponent(app.hostKey)}`,
      );
      const status = (await response.json()) as { runtimeStatus: string; output: unknown };
      if (status.runtimeStatus === 'Completed' || status.runtimeStatus === 'Failed') return status;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    throw new Error(`the orchestration ${name} did not finish`);
  }

  it('answers 401 without the host key on the webhooks and the admin API, and runs nothing', async () => {
    const escaped = `escaped-${path.basename(dataDir)}`;
    const input = JSON.stringify({
      tenant: `../../${escaped}`,
      sources: [{ root: allowed, prefix: '' }],
      dryRun: false,
    });
    for (const headers of [
      {},
      { 'content-type': 'text/plain' },
      { 'x-functions-key': 'not-the-key' },
      { 'x-functions-key': `${app.hostKey}x` },
    ] as Record<string, string>[]) {
      const started = await fetch(`${app.url}${webhook('migrateLocalToBlob')}`, {
        method: 'POST',
        headers,
        body: input,
      });
      expect(started.status).toBe(401);
      expect(errorCode(await started.text())).toBe('unauthorized');
    }
    const wrongCode = await fetch(`${app.url}${webhook('migrateLocalToBlob')}?code=nope`, {
      method: 'POST',
      body: input,
    });
    expect(wrongCode.status).toBe(401);
    const status = await fetch(`${app.url}/runtime/webhooks/durabletask/instances/anything`);
    expect(status.status).toBe(401);
    const timer = await fetch(`${app.url}/admin/functions/retentionPrune`, { method: 'POST', body: '{}' });
    expect(timer.status).toBe(401);
    expect(errorCode(await timer.text())).toBe('unauthorized');
    // Nothing was written beside the data folder.
    expect(existsSync(path.join(dataDir, '..', '..', escaped))).toBe(false);
    expect(existsSync(path.join(path.dirname(dataDir), escaped))).toBe(false);
    // With the key, the admin API runs the timer (`code` works as the header does).
    const withKey = await fetch(
      `${app.url}/admin/functions/retentionPrune?code=${encodeURIComponent(app.hostKey)}`,
      {
        method: 'POST',
        body: '{}',
      },
    );
    expect(withKey.status).toBe(202);
  });

  it('serves loopback Host names only', async () => {
    for (const host of ['evil.example', 'evil.example:80', '10.0.0.1', '127.0.0.1.evil.example']) {
      const answer = await rawRequest(app.url, '/api/health', { headers: { host } });
      expect(answer.status, host).toBe(400);
      expect(errorCode(answer.body)).toBe('invalid_argument');
    }
    const port = new URL(app.url).port;
    for (const host of [`localhost:${port}`, `127.0.0.1:${port}`, `[::1]:${port}`]) {
      expect((await rawRequest(app.url, '/api/health', { headers: { host } })).status, host).toBe(200);
    }
  });

  it('bounds a webhook body: 413 that the client still sending reads, nothing started', async () => {
    for (const chunked of [false, true]) {
      const answer = await streamBody(app.url, webhook('migrateLocalToBlob'), 8 * 1024 * 1024, {
        method: 'POST',
        headers: { 'x-functions-key': app.hostKey, 'content-type': 'application/json' },
        chunked,
      });
      expect(answer, `chunked ${chunked}`).toMatchObject({ status: 413, sentWhole: true });
      expect(answer.error).toBeUndefined();
      expect(answer.head).toContain('connection: close');
      expect(bodyCode(answer)).toBe('payload_too_large');
    }
    const admin = await streamBody(app.url, '/admin/functions/retentionPrune', 4 * 1024 * 1024, {
      method: 'POST',
      headers: { 'x-functions-key': app.hostKey },
    });
    expect(admin).toMatchObject({ status: 413, sentWhole: true });
  });

  it('answers 413 to an oversize key/value PUT so that a client streaming the whole body reads it', async () => {
    for (let attempt = 0; attempt < 6; attempt++) {
      const answer = await streamBody(app.url, `/api/kv/big/value-${attempt}`, 8 * 1024 * 1024, {
        headers: { authorization: `Bearer ${ops.key}`, 'content-type': 'application/octet-stream' },
        chunked: attempt % 2 === 1,
      });
      expect(answer, `attempt ${attempt}`).toMatchObject({ status: 413, sentWhole: true });
      expect(answer.error).toBeUndefined();
      expect(answer.head).toContain('connection: close');
      expect(bodyCode(answer)).toBe('payload_too_large');
    }
    const asOps = client(app.url, ops.key);
    expect((await asOps('/api/kv/big/value-0')).status).toBe(404);
  });

  it('answers 400 with the error JSON for a path that does not decode, on every route', async () => {
    for (const bad of ['%FF', '%ED%A0%80', '%C0%AE%C0%AE']) {
      for (const route of [
        '/api/migrations/',
        '/api/encryption/rewraps/',
        '/api/kv/notes/',
        '/api/health/',
      ]) {
        const answer = await rawRequest(app.url, `${route}${bad}`, {
          headers: { authorization: `Bearer ${ops.key}` },
        });
        expect(answer.status, `${route}${bad}`).toBe(400);
        expect(errorCode(answer.body)).toBe('invalid_argument');
      }
    }
  });

  it('checks an orchestration’s input whoever starts it: tenant, source roots, audit actor', async () => {
    const escaped = `escaped-${path.basename(dataDir)}`;
    const refused: [unknown, string][] = [
      [{ tenant: `../../${escaped}`, sources: [{ root: allowed, prefix: '' }], dryRun: false }, 'tenant'],
      [{ tenant: 'victim', sources: [{ root: outside, prefix: '' }], dryRun: false }, 'sources.0.root'],
      [{ tenant: 'victim', sources: [{ root: '/etc', prefix: 'etc' }], dryRun: false }, 'sources.0.root'],
      [
        { tenant: 'victim', sources: [{ root: `${allowed}/../`, prefix: '' }], dryRun: false },
        'sources.0.root',
      ],
      [
        {
          tenant: 'victim',
          sources: [{ root: allowed, prefix: '' }],
          dryRun: false,
          audit: { tenant: 'victim', actor: 'someone-else' },
        },
        'actor',
      ],
    ];
    for (const [input, field] of refused) {
      const status = await runOrchestration('migrateLocalToBlob', input);
      expect(status.runtimeStatus, field).toBe('Failed');
      expect(String(status.output), field).toContain(field);
    }
    expect(existsSync(path.join(path.dirname(dataDir), escaped))).toBe(false);
    const victim = path.join(dataDir, 'victim');
    expect(existsSync(victim) ? readdirSync(victim, { recursive: true }) : []).toEqual([]);
    // An input the route would make runs (a dry run: the target of a migration is the Blob backend).
    const allowedRun = await runOrchestration('migrateLocalToBlob', {
      tenant: 'victim',
      sources: [{ root: allowed, prefix: 'moved' }],
      dryRun: true,
      audit: { tenant: 'victim', actor: ops.tenant },
    });
    expect(allowedRun.runtimeStatus).toBe('Completed');
    expect(allowedRun.output).toMatchObject({ copied: 1, keysCopied: ['moved/notes/a.txt'] });
  });
});
