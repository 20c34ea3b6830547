import { rm } from 'node:fs/promises';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import {
  apiKeysSetting,
  type Backend,
  backendSettings,
  client,
  newTenant,
  rawRequest,
  type RunningApp,
  startApp,
} from '../support/app';
import { azurite } from '../support/azurite';
import { eventually } from '../support/eventually';

/** The thread routes (docs/threads.md) over real HTTP, against the app in the local runtime. */

type Call = ReturnType<typeof client>;

interface ErrorBody {
  error: { code: string; message: string; runId?: string; status?: string; retryAfter?: number };
}

const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64');
const unb64 = (data: string) => JSON.parse(Buffer.from(data, 'base64').toString()) as unknown;

function checkpointBody(
  checkpointId: string,
  options: {
    parent?: string | null;
    ns?: string;
    versions?: Record<string, number | string>;
    values?: Record<string, unknown>;
    metadata?: Record<string, unknown>;
    runId?: string;
  } = {},
): string {
  const values: Record<string, { type: string; data: string } | null> = {};
  for (const [channel, value] of Object.entries(options.values ?? {})) {
    values[channel] = value === null ? null : { type: 'json', data: b64(value) };
  }
  return JSON.stringify({
    checkpointId,
    ...(options.ns === undefined ? {} : { ns: options.ns }),
    parent: options.parent ?? null,
    ...(options.runId === undefined ? {} : { runId: options.runId }),
    checkpoint: { type: 'json', data: b64({ v: 4, id: checkpointId }) },
    metadata: options.metadata ?? {},
    channelVersions: options.versions ?? {},
    values,
  });
}

const post = (call: Call, path: string, body: string) => call(path, { method: 'POST', body });

async function errorOf(response: Response): Promise<ErrorBody['error']> {
  expect(response.headers.get('content-type')).toContain('application/json');
  return ((await response.json()) as ErrorBody).error;
}

describe.each<Backend>(['local', 'blob'])('thread API on the %s backend', (backend) => {
  const alpha = newTenant('alpha');
  const beta = newTenant('beta');
  const settings = backendSettings(backend, azurite().blobEndpoint);
  let app: RunningApp;
  let asAlpha: Call;
  let asBeta: Call;
  let anonymous: Call;

  beforeAll(async () => {
    app = await startApp({ CAIRN_API_KEYS: apiKeysSetting([alpha, beta]), ...settings });
    asAlpha = client(app.url, alpha.key);
    asBeta = client(app.url, beta.key);
    anonymous = client(app.url);
  });
  afterAll(async () => {
    await app.stop();
    if (settings['CAIRN_DATA_DIR'] !== undefined)
      await rm(settings['CAIRN_DATA_DIR'], { recursive: true, force: true });
  });

  it('creates a thread, stores checkpoints and writes, reads them back, rewinds and deletes', async () => {
    const created = await asAlpha('/api/threads/life', { method: 'PUT' });
    expect(created.status).toBe(201);
    expect(await created.json()).toMatchObject({ threadId: 'life', heads: {}, run: null });
    expect((await asAlpha('/api/threads/life', { method: 'PUT' })).status).toBe(200);

    const c1 = checkpointBody('c1', {
      versions: { messages: 1, __start__: 1 },
      values: { messages: ['hi'], __start__: null },
      metadata: { source: 'input', step: -1 },
    });
    const stored = await post(asAlpha, '/api/threads/life/checkpoints', c1);
    expect(stored.status).toBe(201);
    expect(await stored.json()).toEqual({ threadId: 'life', ns: '', checkpointId: 'c1', head: 'c1' });
    expect((await post(asAlpha, '/api/threads/life/checkpoints', c1)).status).toBe(200);
    const c2 = checkpointBody('c2', {
      parent: 'c1',
      versions: { messages: 2, __start__: 1 },
      values: { messages: ['hi', 'hello'] },
      metadata: { source: 'loop', step: 0 },
    });
    expect((await post(asAlpha, '/api/threads/life/checkpoints', c2)).status).toBe(201);
    const writes = await post(
      asAlpha,
      '/api/threads/life/checkpoints/c2/writes',
      JSON.stringify({
        taskId: 'task-1',
        taskPath: '~agent',
        writes: [{ channel: 'messages', idx: 0, type: 'json', data: b64(['next']) }],
      }),
    );
    expect(writes.status).toBe(200);
    expect(await writes.json()).toEqual({ threadId: 'life', ns: '', checkpointId: 'c2', writes: 1 });

    const latest = await asAlpha('/api/threads/life/checkpoints/latest');
    expect(latest.status).toBe(200);
    const tuple = (await latest.json()) as {
      checkpointId: string;
      parent: string;
      checkpoint: { type: string; data: string };
      metadata: unknown;
      channelVersions: unknown;
      values: Record<string, { type: string; data: string }>;
      pendingWrites: {
        taskId: string;
        taskPath: string;
        channel: string;
        idx: number;
        type: string;
        data: string;
      }[];
    };
    expect(tuple).toMatchObject({
      checkpointId: 'c2',
      parent: 'c1',
      metadata: { source: 'loop', step: 0 },
      channelVersions: { messages: 2, __start__: 1 },
    });
    expect(unb64(tuple.checkpoint.data)).toEqual({ v: 4, id: 'c2' });
    expect(Object.keys(tuple.values)).toEqual(['messages']);
    expect(unb64(tuple.values['messages']?.data ?? '')).toEqual(['hi', 'hello']);
    expect(tuple.pendingWrites).toEqual([
      {
        taskId: 'task-1',
        taskPath: '~agent',
        channel: 'messages',
        idx: 0,
        type: 'json',
        data: b64(['next']),
      },
    ]);
    const first = (await (await asAlpha('/api/threads/life/checkpoints/c1?ns=')).json()) as typeof tuple;
    expect(unb64(first.values['messages']?.data ?? '')).toEqual(['hi']);

    const history = await asAlpha('/api/threads/life/checkpoints?limit=1');
    const page = (await history.json()) as { checkpoints: { checkpointId: string }[]; next: string };
    expect(page.checkpoints.map((c) => c.checkpointId)).toEqual(['c2']);
    const rest = (await (
      await asAlpha(`/api/threads/life/checkpoints?limit=5&cursor=${page.next}`)
    ).json()) as typeof page;
    expect([rest.checkpoints.map((c) => c.checkpointId), rest.next]).toEqual([['c1'], null]);
    const filtered = (await (
      await asAlpha(`/api/threads/life/checkpoints?filter=${encodeURIComponent('{"source":"input"}')}`)
    ).json()) as typeof page;
    expect(filtered.checkpoints.map((c) => c.checkpointId)).toEqual(['c1']);

    const rewound = await post(asAlpha, '/api/threads/life/rewind', JSON.stringify({ checkpointId: 'c1' }));
    expect(rewound.status).toBe(200);
    expect(
      ((await rewound.json()) as { heads: Record<string, { checkpointId: string }> }).heads['']?.checkpointId,
    ).toBe('c1');
    expect(
      ((await (await asAlpha('/api/threads/life/checkpoints/latest')).json()) as typeof tuple).checkpointId,
    ).toBe('c1');
    expect((await asAlpha('/api/threads/life/checkpoints/c2')).status).toBe(200);

    expect((await asAlpha('/api/threads?prefix=li')).status).toBe(200);
    expect((await asAlpha('/api/threads/life', { method: 'DELETE' })).status).toBe(204);
    const gone = await asAlpha('/api/threads/life');
    expect(gone.status).toBe(404);
    expect((await errorOf(gone)).code).toBe('not_found');
    expect((await asAlpha('/api/threads/life/checkpoints/c1')).status).toBe(404);
  });

  it("keeps tenants apart: another tenant's thread is absent, and the same name is its own thread", async () => {
    expect(
      (
        await post(
          asAlpha,
          '/api/threads/shared/checkpoints',
          checkpointBody('a1', { versions: { m: 1 }, values: { m: 'alpha' } }),
        )
      ).status,
    ).toBe(201);
    const absent: [string, RequestInit][] = [
      ['/api/threads/shared', { method: 'GET' }],
      ['/api/threads/shared', { method: 'DELETE' }],
      ['/api/threads/shared/checkpoints/latest', { method: 'GET' }],
      ['/api/threads/shared/checkpoints/a1', { method: 'GET' }],
      ['/api/threads/shared/checkpoints', { method: 'GET' }],
      ['/api/threads/shared/rewind', { method: 'POST', body: JSON.stringify({ checkpointId: 'a1' }) }],
      ['/api/threads/shared/runs/run-x', { method: 'GET' }],
      ['/api/threads/shared/runs/run-x/heartbeat', { method: 'POST' }],
      [
        '/api/threads/shared/runs/run-x/finish',
        { method: 'POST', body: JSON.stringify({ status: 'finished' }) },
      ],
    ];
    for (const [path, init] of absent) {
      const response = await asBeta(path, init);
      expect(response.status, `${init.method} ${path}`).toBe(404);
      expect((await errorOf(response)).code).toBe('not_found');
    }
    expect(await (await asBeta('/api/threads')).json()).toEqual({ threads: [], next: null });

    // Beta's writes make beta's own thread of that name; alpha's is untouched.
    expect(
      (
        await post(
          asBeta,
          '/api/threads/shared/checkpoints',
          checkpointBody('b1', { versions: { m: 1 }, values: { m: 'beta' } }),
        )
      ).status,
    ).toBe(201);
    const run = await post(asBeta, '/api/threads/shared/runs', JSON.stringify({ onBusy: 'reject' }));
    expect(run.status).toBe(201);
    const alphaLatest = (await (await asAlpha('/api/threads/shared/checkpoints/latest')).json()) as {
      checkpointId: string;
      values: Record<string, { data: string }>;
    };
    expect([alphaLatest.checkpointId, unb64(alphaLatest.values['m']?.data ?? '')]).toEqual(['a1', 'alpha']);
    expect(((await (await asAlpha('/api/threads/shared')).json()) as { run: unknown }).run).toBeNull();
    expect(
      (await post(asAlpha, '/api/threads/shared/runs', JSON.stringify({ onBusy: 'reject' }))).status,
    ).toBe(201);
    expect(await (await asBeta('/api/threads')).json()).toEqual({
      threads: [{ threadId: 'shared' }],
      next: null,
    });
  });

  it('refuses bad input with 400 naming the field, before storing anything', async () => {
    const bad: [string, RequestInit, string][] = [
      ['/api/threads/bad%20name', { method: 'PUT' }, 'threadId'],
      ['/api/threads/x%21', { method: 'GET' }, 'threadId'],
      ['/api/threads/v/checkpoints', { method: 'POST', body: 'not json' }, 'body'],
      [
        '/api/threads/v/checkpoints',
        { method: 'POST', body: JSON.stringify({ checkpointId: 'c1' }) },
        'checkpoint',
      ],
      ['/api/threads/v/checkpoints', { method: 'POST', body: checkpointBody('latest') }, 'checkpointId'],
      [
        '/api/threads/v/checkpoints',
        { method: 'POST', body: checkpointBody('c1', { metadata: { big: 'x'.repeat(17_000) } }) },
        'metadata',
      ],
      [
        '/api/threads/v/checkpoints',
        { method: 'POST', body: checkpointBody('c1', { versions: { m: 1 } }) },
        'values.m',
      ],
      [
        '/api/threads/v/checkpoints',
        { method: 'POST', body: checkpointBody('c1').replace('"metadata"', '"extra":1,"metadata"') },
        'extra',
      ],
      [
        '/api/threads/v/checkpoints',
        {
          method: 'POST',
          body: JSON.stringify({
            ...JSON.parse(checkpointBody('c1', { versions: { m: 1 } })),
            values: { m: { type: 'json', data: '%%%' } },
          }),
        },
        'values.m.data',
      ],
      [
        '/api/threads/v/checkpoints',
        {
          method: 'POST',
          body: checkpointBody('c1').replace('"channelVersions":{}', '"channelVersions":{"__proto__":1}'),
        },
        'channelVersions',
      ],
      ['/api/threads/v/checkpoints?limit=0', { method: 'GET' }, 'limit'],
      ['/api/threads/v/checkpoints?filter=notjson', { method: 'GET' }, 'filter'],
      ['/api/threads/v/checkpoints/latest?ns=%01', { method: 'GET' }, 'ns'],
      [
        '/api/threads/v/checkpoints/c1/writes',
        {
          method: 'POST',
          body: JSON.stringify({
            taskId: 't',
            writes: [{ channel: 'm', idx: 1.5, type: 'json', data: b64(1) }],
          }),
        },
        'writes.0.idx',
      ],
      [
        '/api/threads/v/checkpoints/c1/writes',
        { method: 'POST', body: JSON.stringify({ taskId: 't', writes: [] }) },
        'writes',
      ],
      ['/api/threads/v/runs', { method: 'POST', body: JSON.stringify({ onBusy: 'maybe' }) }, 'onBusy'],
      [
        '/api/threads/v/runs',
        { method: 'POST', body: JSON.stringify({ leaseSeconds: 0.5 }) },
        'leaseSeconds',
      ],
      ['/api/threads/v/runs', { method: 'POST', body: JSON.stringify({ busyTimeout: 61 }) }, 'busyTimeout'],
      [
        '/api/threads/v/runs/run-1/finish',
        { method: 'POST', body: JSON.stringify({ status: 'done' }) },
        'status',
      ],
      [
        '/api/threads/v/rewind',
        { method: 'POST', body: JSON.stringify({ checkpointId: '.' }) },
        'checkpointId',
      ],
      ['/api/threads?limit=1001', { method: 'GET' }, 'limit'],
      ['/api/threads?prefix=a%2Fb', { method: 'GET' }, 'prefix'],
    ];
    for (const [path, init, field] of bad) {
      const response = await asAlpha(path, init);
      expect(response.status, `${init.method} ${path}`).toBe(400);
      const error = await errorOf(response);
      expect(error.code).toBe('invalid_argument');
      expect(error.message, `${init.method} ${path}`).toMatch(
        new RegExp(`^${field.replaceAll('.', '\\.')}:`),
      );
    }
    // `..` as sent (fetch would normalise it away): the route hands it over decoded, and it is refused.
    const dots = await rawRequest(app.url, '/api/threads/%2E%2E/checkpoints/latest', {
      headers: { authorization: `Bearer ${alpha.key}` },
    });
    expect(dots.status).toBe(400);
    expect((JSON.parse(dots.body) as ErrorBody).error.message).toMatch(/^threadId:/);
    const tooBig = await post(
      asAlpha,
      '/api/threads/v/checkpoints/c1/writes',
      'x'.repeat(4 * 1024 * 1024 + 1),
    );
    expect(tooBig.status).toBe(413);
    expect((await asAlpha('/api/threads/v')).status).toBe(404);
    expect((await asAlpha('/api/threads/bad%20name/checkpoints/latest')).status).toBe(400);
  });

  it('answers 401 without a credential and 405 with Allow for a wrong method', async () => {
    const routes: [string, string][] = [
      ['/api/threads', 'GET'],
      ['/api/threads/t', 'PUT'],
      ['/api/threads/t/checkpoints', 'POST'],
      ['/api/threads/t/checkpoints/latest', 'GET'],
      ['/api/threads/t/checkpoints/c1', 'GET'],
      ['/api/threads/t/checkpoints/c1/writes', 'POST'],
      ['/api/threads/t/rewind', 'POST'],
      ['/api/threads/t/runs', 'POST'],
      ['/api/threads/t/runs/r', 'GET'],
      ['/api/threads/t/runs/r/heartbeat', 'POST'],
      ['/api/threads/t/runs/r/finish', 'POST'],
    ];
    for (const [path, method] of routes) {
      const response = await anonymous(path, { method, ...(method === 'POST' ? { body: '{}' } : {}) });
      expect(response.status, `${method} ${path}`).toBe(401);
      expect(response.headers.get('www-authenticate')).toBe('Bearer');
    }
    const wrong = await asAlpha('/api/threads/t', { method: 'PATCH' });
    expect(wrong.status).toBe(405);
    expect(wrong.headers.get('allow')).toBe('PUT, GET, DELETE');
    expect((await asAlpha('/api/threads/t/checkpoints/latest', { method: 'POST', body: '{}' })).status).toBe(
      405,
    );
  });

  it('answers every shape the OpenAPI document gives (each answer here is checked against it)', async () => {
    // A run started with an empty body holds the thread: live in the run, the thread and a heartbeat.
    const started = await post(asAlpha, '/api/threads/shapes/runs', '');
    expect(started.status).toBe(201);
    const run = (await started.json()) as { runId: string };
    expect(run).toMatchObject({ status: 'running', fencingToken: 1, interrupted: null });
    expect(await (await asAlpha(`/api/threads/shapes/runs/${run.runId}`)).json()).toMatchObject({
      status: 'running',
    });
    expect(await (await asAlpha('/api/threads/shapes')).json()).toMatchObject({
      run: { runId: run.runId, status: 'running' },
      recentRuns: [],
    });

    // Format 3 in a subgraph namespace: the child lists the parent's pending sends.
    const ns = 'sub:graph|1';
    const q = `ns=${encodeURIComponent(ns)}`;
    const old = (id: string, parent: string | null) => {
      const body = JSON.parse(
        checkpointBody(id, { ns, parent, runId: run.runId, versions: { m: id }, values: { m: id } }),
      ) as Record<string, unknown>;
      return JSON.stringify({ ...body, v: 3 });
    };
    expect((await post(asAlpha, '/api/threads/shapes/checkpoints', old('c1', null))).status).toBe(201);
    const writes = await post(
      asAlpha,
      '/api/threads/shapes/checkpoints/c1/writes',
      JSON.stringify({
        ns,
        taskId: 'task-1',
        runId: run.runId,
        writes: [
          { channel: '__pregel_tasks', idx: 0, type: 'msgpack', data: b64('send') },
          { channel: '__interrupt__', idx: -3, type: 'json', data: '' },
        ],
      }),
    );
    expect(await writes.json()).toEqual({ threadId: 'shapes', ns, checkpointId: 'c1', writes: 2 });
    expect((await post(asAlpha, '/api/threads/shapes/checkpoints', old('c2', 'c1'))).status).toBe(201);
    const child = (await (await asAlpha(`/api/threads/shapes/checkpoints/c2?${q}`)).json()) as {
      pendingSends: unknown[];
      runId: string;
      v: number;
    };
    expect([child.v, child.pendingSends, child.runId]).toEqual([
      3,
      [{ type: 'msgpack', data: b64('send') }],
      run.runId,
    ]);
    const parent = (await (await asAlpha(`/api/threads/shapes/checkpoints/c1?${q}`)).json()) as {
      pendingWrites: { idx: number }[];
    };
    expect(parent.pendingWrites.map((write) => write.idx)).toEqual([-3, 0]);
    const page = (await (await asAlpha(`/api/threads/shapes/checkpoints?${q}&limit=1`)).json()) as {
      next: string | null;
    };
    expect(page.next).not.toBeNull();
    expect(
      (await asAlpha(`/api/threads/shapes/checkpoints?cursor=${page.next ?? ''}&before=c2`)).status,
    ).toBe(400);
    const thread = (await (await asAlpha('/api/threads/shapes')).json()) as {
      heads: Record<string, { checkpointId: string; parent: string | null }>;
    };
    expect(thread.heads[ns]).toMatchObject({ checkpointId: 'c2', parent: 'c1' });

    // Writes to a checkpoint not stored yet are taken (LangGraph sends them so with a DeltaChannel)
    // and seen by no reader until it is; the refusals: a parent not stored, a run the thread never
    // had, a body over the limit.
    const early = await post(
      asAlpha,
      '/api/threads/shapes/checkpoints/c9/writes',
      JSON.stringify({
        ns,
        taskId: 't',
        runId: run.runId,
        writes: [{ channel: 'm', idx: 0, type: 'json', data: '' }],
      }),
    );
    expect(await early.json()).toEqual({ threadId: 'shapes', ns, checkpointId: 'c9', writes: 1 });
    const unseen = await asAlpha(`/api/threads/shapes/checkpoints/c9?ns=${encodeURIComponent(ns)}`);
    expect([unseen.status, (await errorOf(unseen)).code]).toEqual([404, 'not_found']);
    const orphan = await post(
      asAlpha,
      '/api/threads/shapes/checkpoints',
      checkpointBody('c3', { ns, parent: 'c9', runId: run.runId }),
    );
    expect([orphan.status, (await errorOf(orphan)).code]).toEqual([409, 'conflict']);
    const stranger = await post(
      asAlpha,
      '/api/threads/shapes/rewind',
      JSON.stringify({ ns, checkpointId: 'c1', runId: 'run-never' }),
    );
    expect(stranger.status).toBe(409);
    expect(await errorOf(stranger)).toMatchObject({
      code: 'run_fenced',
      runId: 'run-never',
      status: 'unknown',
    });
    const oversize = await post(asAlpha, '/api/threads/shapes/rewind', 'x'.repeat(16 * 1024 + 1));
    expect(oversize.status).toBe(413);
    expect(await errorOf(oversize)).toMatchObject({ code: 'payload_too_large', limit: 16 * 1024 });
    const rewound = await post(
      asAlpha,
      '/api/threads/shapes/rewind',
      JSON.stringify({ ns, checkpointId: 'c1', runId: run.runId }),
    );
    expect(rewound.status).toBe(200);

    // Renewed, finished (twice: the same answer), then fenced for another status.
    const beat = await post(asAlpha, `/api/threads/shapes/runs/${run.runId}/heartbeat`, '{}');
    expect(await beat.json()).toMatchObject({ runId: run.runId, status: 'running' });
    const finish = (status: string) =>
      post(asAlpha, `/api/threads/shapes/runs/${run.runId}/finish`, JSON.stringify({ status }));
    const finished = await (await finish('finished')).json();
    expect(finished).toMatchObject({ status: 'finished' });
    expect(await (await finish('finished')).json()).toEqual(finished);
    const refinished = await finish('failed');
    expect(refinished.status).toBe(409);
    expect(await errorOf(refinished)).toMatchObject({ code: 'run_fenced', status: 'finished' });
    expect(await (await asAlpha(`/api/threads/shapes/runs/${run.runId}`)).json()).toEqual(finished);

    // A lease that ends: the run reads as expired, is fenced, and is recorded as expired by the next start.
    const brief = (await (
      await post(asAlpha, '/api/threads/shapes/runs', JSON.stringify({ leaseSeconds: 1 }))
    ).json()) as { runId: string };
    // The app's clock is its own: wait until it says the lease has ended.
    await eventually('the brief run expires', async () => {
      const read = (await (await asAlpha(`/api/threads/shapes/runs/${brief.runId}`)).json()) as {
        status: string;
      };
      expect(['running', 'expired']).toContain(read.status);
      return read.status === 'expired';
    });
    const late = await post(asAlpha, `/api/threads/shapes/runs/${brief.runId}/heartbeat`, '');
    expect(await errorOf(late)).toMatchObject({ code: 'run_fenced', status: 'expired' });
    const next = (await (
      await post(asAlpha, '/api/threads/shapes/runs', JSON.stringify({ onBusy: 'interrupt' }))
    ).json()) as { runId: string; interrupted: string | null };
    expect(next.interrupted).toBeNull();
    const after = (await (await asAlpha('/api/threads/shapes')).json()) as {
      recentRuns: { runId: string; status: string }[];
    };
    expect(after.recentRuns.map((ended) => [ended.runId, ended.status])).toEqual([
      [brief.runId, 'expired'],
      [run.runId, 'finished'],
    ]);
    expect((await finish('finished')).status).toBe(200);
    expect(
      (await post(asAlpha, `/api/threads/shapes/runs/${next.runId}/finish`, '{"status":"failed"}')).status,
    ).toBe(200);

    // Thread names page by page.
    for (const name of ['shapes-a', 'shapes-b']) {
      expect((await asAlpha(`/api/threads/${name}`, { method: 'PUT' })).status).toBe(201);
    }
    const first = (await (await asAlpha('/api/threads?prefix=shapes-&limit=1')).json()) as {
      threads: { threadId: string }[];
      next: string | null;
    };
    expect(first.threads).toEqual([{ threadId: 'shapes-a' }]);
    const second = (await (
      await asAlpha(`/api/threads?prefix=shapes-&limit=1&cursor=${first.next ?? ''}`)
    ).json()) as typeof first;
    expect(second).toEqual({ threads: [{ threadId: 'shapes-b' }], next: null });
    expect(
      (await (await asAlpha('/api/threads?after=shapes-a&prefix=shapes-')).json()) as typeof first,
    ).toEqual({ threads: [{ threadId: 'shapes-b' }], next: null });
  });

  it('answers 409 conflict to a re-put of a stored checkpoint id with other values, and keeps the first', async () => {
    const c1 = checkpointBody('c1', { versions: { m: 1 }, values: { m: 'first' } });
    expect((await post(asAlpha, '/api/threads/reput/checkpoints', c1)).status).toBe(201);
    const c2 = checkpointBody('c2', { parent: 'c1', versions: { m: 2 }, values: { m: 'second' } });
    expect((await post(asAlpha, '/api/threads/reput/checkpoints', c2)).status).toBe(201);
    const otherData = checkpointBody('c2', { parent: 'c1', versions: { m: 2 }, values: { m: 'other' } });
    const parsed = JSON.parse(c2) as { values: Record<string, { type: string; data: string }> };
    const otherType = JSON.stringify({
      ...parsed,
      values: { m: { ...parsed.values['m'], type: 'msgpack' } },
    });
    for (const other of [otherData, otherType]) {
      const refused = await post(asAlpha, '/api/threads/reput/checkpoints', other);
      const error = await errorOf(refused);
      expect([refused.status, error.code]).toEqual([409, 'conflict']);
      expect(error.message).toMatch(/^checkpointId:/);
    }
    const stored = await asAlpha('/api/threads/reput/checkpoints/c2');
    const tuple = (await stored.json()) as { values: Record<string, { type: string; data: string }> };
    expect(tuple.values['m']?.type).toBe('json');
    expect(unb64(tuple.values['m']?.data ?? '')).toBe('second');
    const retry = await post(asAlpha, '/api/threads/reput/checkpoints', c2);
    expect([retry.status, await retry.json()]).toEqual([
      200,
      { threadId: 'reput', ns: '', checkpointId: 'c2', head: 'c2' },
    ]);
  });

  it('answers 409 thread_busy with Retry-After, run_fenced and conflict, storing nothing', async () => {
    const started = await post(
      asAlpha,
      '/api/threads/busy/runs',
      JSON.stringify({ onBusy: 'reject', leaseSeconds: 30 }),
    );
    expect(started.status).toBe(201);
    const holder = (await started.json()) as {
      runId: string;
      status: string;
      fencingToken: number;
      leaseExpiresAt: string;
    };
    expect(holder).toMatchObject({ status: 'running', fencingToken: 1 });

    const refused = await post(asAlpha, '/api/threads/busy/runs', JSON.stringify({ onBusy: 'reject' }));
    expect(refused.status).toBe(409);
    const retryAfter = Number(refused.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(25);
    expect(retryAfter).toBeLessThanOrEqual(30);
    expect(await errorOf(refused)).toMatchObject({ code: 'thread_busy', runId: holder.runId, retryAfter });
    const waited = await post(
      asAlpha,
      '/api/threads/busy/runs',
      JSON.stringify({ onBusy: 'wait', busyTimeout: 0.5 }),
    );
    expect(waited.status).toBe(409);
    expect(Number(waited.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect((await errorOf(waited)).code).toBe('thread_busy');

    const withoutRun = await post(
      asAlpha,
      '/api/threads/busy/checkpoints',
      checkpointBody('c1', { versions: { m: 1 }, values: { m: 1 } }),
    );
    expect(withoutRun.status).toBe(409);
    expect((await errorOf(withoutRun)).code).toBe('thread_busy');
    const deleting = await asAlpha('/api/threads/busy', { method: 'DELETE' });
    expect([deleting.status, (await errorOf(deleting)).code]).toEqual([409, 'thread_busy']);

    expect(
      (
        await post(
          asAlpha,
          '/api/threads/busy/checkpoints',
          checkpointBody('c1', { runId: holder.runId, versions: { m: 1 }, values: { m: 1 } }),
        )
      ).status,
    ).toBe(201);
    const conflicting = await post(
      asAlpha,
      '/api/threads/busy/checkpoints',
      checkpointBody('c1', {
        runId: holder.runId,
        versions: { m: 1 },
        values: { m: 2 },
        metadata: { other: true },
      }),
    );
    expect([conflicting.status, (await errorOf(conflicting)).code]).toEqual([409, 'conflict']);

    const interrupting = await post(
      asAlpha,
      '/api/threads/busy/runs',
      JSON.stringify({ onBusy: 'interrupt' }),
    );
    expect(interrupting.status).toBe(201);
    const next = (await interrupting.json()) as { runId: string; interrupted: string; fencingToken: number };
    expect([next.interrupted, next.fencingToken]).toEqual([holder.runId, 2]);
    const fenced = await post(
      asAlpha,
      '/api/threads/busy/checkpoints',
      checkpointBody('c2', { parent: 'c1', runId: holder.runId, versions: { m: 2 }, values: { m: 2 } }),
    );
    expect(fenced.status).toBe(409);
    expect(await errorOf(fenced)).toMatchObject({
      code: 'run_fenced',
      runId: holder.runId,
      status: 'interrupted',
    });
    expect((await asAlpha('/api/threads/busy/checkpoints/c2')).status).toBe(404);
    const heartbeat = await post(asAlpha, `/api/threads/busy/runs/${holder.runId}/heartbeat`, '');
    expect([heartbeat.status, (await errorOf(heartbeat)).code]).toEqual([409, 'run_fenced']);

    expect((await asAlpha(`/api/threads/busy/runs/${holder.runId}`)).status).toBe(200);
    const beat = await post(
      asAlpha,
      `/api/threads/busy/runs/${next.runId}/heartbeat`,
      JSON.stringify({ leaseSeconds: 90 }),
    );
    expect(beat.status).toBe(200);
    const finished = await post(
      asAlpha,
      `/api/threads/busy/runs/${next.runId}/finish`,
      JSON.stringify({ status: 'finished' }),
    );
    expect(finished.status).toBe(200);
    expect(await finished.json()).toMatchObject({ runId: next.runId, status: 'finished' });
    expect((await asAlpha('/api/threads/busy', { method: 'DELETE' })).status).toBe(204);

    // Pending writes create an absent thread, but not when they name a run: no run holds a thread
    // that does not exist, so they are fenced and the thread stays absent.
    const unheld = await post(
      asAlpha,
      '/api/threads/never-held/checkpoints/c1/writes',
      JSON.stringify({
        taskId: 't',
        runId: holder.runId,
        writes: [{ channel: 'm', idx: 0, type: 'json', data: b64(1) }],
      }),
    );
    expect([unheld.status, (await errorOf(unheld)).code]).toEqual([409, 'run_fenced']);
    expect((await asAlpha('/api/threads/never-held')).status).toBe(404);
  });
});

describe('two app instances on one Azurite', () => {
  const tenant = newTenant('fleet');
  const settings = backendSettings('blob', azurite().blobEndpoint);
  let first: RunningApp;
  let second: RunningApp;

  beforeAll(async () => {
    const env = { CAIRN_API_KEYS: apiKeysSetting([tenant]), ...settings };
    [first, second] = await Promise.all([startApp(env), startApp(env)]);
  });
  afterAll(async () => {
    await Promise.all([first.stop(), second.stop()]);
  });

  it('lets exactly one of 16 concurrent reject starters run, in every one of five rounds', async () => {
    const calls = [client(first.url, tenant.key), client(second.url, tenant.key)];
    for (let round = 0; round < 5; round++) {
      const statuses = await Promise.all(
        Array.from({ length: 16 }, (_, i) =>
          post(
            calls[i % 2] as Call,
            `/api/threads/race-${round}/runs`,
            JSON.stringify({ onBusy: 'reject' }),
          ).then(async (response) => {
            if (response.status === 409) expect((await errorOf(response)).code).toBe('thread_busy');
            return response.status;
          }),
        ),
      );
      expect(
        statuses.filter((status) => status === 201),
        `round ${round}`,
      ).toHaveLength(1);
      expect(statuses.filter((status) => status === 409)).toHaveLength(15);
    }
  });

  it("frees the thread once a killed holder's lease expires, within the lease + 5 s", async () => {
    const holderCall = client(first.url, tenant.key);
    const otherCall = client(second.url, tenant.key);
    const leaseSeconds = 3;
    const holder = await post(
      holderCall,
      '/api/threads/orphan/runs',
      JSON.stringify({ onBusy: 'reject', leaseSeconds }),
    );
    expect(holder.status).toBe(201);
    const { runId } = (await holder.json()) as { runId: string };
    // The holder's instance dies with it: nothing renews the lease any more.
    first.child.kill('SIGKILL');
    await first.stop();
    expect(
      (await post(otherCall, '/api/threads/orphan/runs', JSON.stringify({ onBusy: 'reject' }))).status,
    ).toBe(409);
    // Freed once the lease ends, however long the loaded machine takes to get there (no bound on
    // the time: that would measure the machine); before its end it was busy (409 above).
    await eventually(
      'the orphaned lease is freed',
      async () => {
        const attempt = await post(
          otherCall,
          '/api/threads/orphan/runs',
          JSON.stringify({ onBusy: 'reject' }),
        );
        expect([201, 409]).toContain(attempt.status);
        return attempt.status === 201;
      },
      { withinMs: (leaseSeconds + 30) * 1000, everyMs: 200 },
    );
    expect(await (await otherCall(`/api/threads/orphan/runs/${runId}`)).json()).toMatchObject({
      status: 'expired',
    });
  });
});
