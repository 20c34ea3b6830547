import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import {
  apiKeysSetting,
  type Backend,
  backendSettings,
  client,
  newTenant,
  type RunningApp,
  startApp,
} from '../support/app';
import { azurite } from '../support/azurite';
import { onCleanUp } from '../support/cleanup';
import { memoryTableSettings } from '../support/tables';
import { scaled } from '../support/timeouts';

/**
 * `/api/mcp` (docs/mcp.md) with the official MCP client SDK over real HTTP against the app in the
 * local runtime, on both backends: the protocol handshake, listings, every tool, resources, tenant
 * isolation, authentication, argument errors, and exactly-once claims across two instances.
 */

const TENANT_TOOLS = [
  'remember',
  'recall',
  'search_memory',
  'forget',
  'forget_all',
  'kv_get',
  'kv_put',
  'kv_append',
  'kv_list',
  'claim_deliveries',
  'add_promise',
  'list_promises',
  'list_threads',
  'get_checkpoint',
  'list_checkpoints',
];

interface ToolAnswer {
  isError?: boolean;
  content: { type: string; text?: string }[];
}

async function connect(url: string, key: string | undefined): Promise<Client> {
  const mcp = new Client({ name: 'cairn-e2e', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(`${url}/api/mcp`), {
    requestInit: key === undefined ? {} : { headers: { authorization: `Bearer ${key}` } },
  });
  await mcp.connect(transport);
  onCleanUp(() => mcp.close());
  return mcp;
}

/** The JSON a tool answered, and whether it is a tool error. */
async function call(mcp: Client, name: string, args: Record<string, unknown> = {}) {
  const answer = (await mcp.callTool({ name, arguments: args })) as ToolAnswer;
  const text = answer.content[0]?.text ?? 'null';
  return { isError: answer.isError === true, json: JSON.parse(text) as Record<string, unknown> };
}

async function ok(mcp: Client, name: string, args: Record<string, unknown> = {}) {
  const answer = await call(mcp, name, args);
  if (answer.isError) throw new Error(`${name} failed: ${JSON.stringify(answer.json)}`);
  return answer.json;
}

/** `levels` arrays around a string. */
function nested(levels: number): unknown {
  let value: unknown = 'deep';
  for (let i = 0; i < levels; i++) value = [value];
  return value;
}

/** The API error of a tool that must fail. */
async function failure(mcp: Client, name: string, args: Record<string, unknown>) {
  const answer = await call(mcp, name, args);
  expect(answer.isError, `${name} ${JSON.stringify(args)} should fail`).toBe(true);
  return (answer.json as { error: { code: string; message: string } }).error;
}

describe.each<Backend>(['local', 'blob'])('MCP server on the %s backend', (backend) => {
  const alpha = newTenant('mcp-alpha');
  const beta = newTenant('mcp-beta');
  const boss = newTenant('mcp-admin', true);
  let app: RunningApp;
  let asAlpha: Client;
  let asBeta: Client;

  beforeAll(async () => {
    const { blobEndpoint, tableEndpoint } = azurite();
    app = await startApp({
      CAIRN_API_KEYS: apiKeysSetting([alpha, beta, boss]),
      ...backendSettings(backend, blobEndpoint),
      ...(backend === 'blob' ? memoryTableSettings(tableEndpoint) : {}),
    });
    asAlpha = await connect(app.url, alpha.key);
    asBeta = await connect(app.url, beta.key);
  });
  afterAll(async () => {
    await app.stop();
  });

  it('initializes, lists the tools with their schemas, and the resource templates', async () => {
    expect(asAlpha.getServerVersion()?.name).toBe('cairn');
    expect(asAlpha.getServerCapabilities()).toMatchObject({ tools: {}, resources: {} });
    const { tools } = await asAlpha.listTools();
    expect(tools.map((tool) => tool.name)).toEqual(TENANT_TOOLS);
    for (const tool of tools) {
      expect(tool.description?.length ?? 0).toBeGreaterThan(40);
      expect(tool.inputSchema).toMatchObject({ type: 'object', additionalProperties: false });
    }
    const remember = tools.find((tool) => tool.name === 'remember');
    expect(remember?.inputSchema.required).toEqual(['namespace', 'key', 'value']);
    expect(Object.keys(remember?.inputSchema.properties ?? {})).toEqual([
      'namespace',
      'key',
      'value',
      'ttl',
      'ifMatch',
      'ifAbsent',
    ]);
    const { resourceTemplates } = await asAlpha.listResourceTemplates();
    expect(resourceTemplates.map((template) => template.uriTemplate)).toEqual([
      'cairn://memory/{namespace}/{key}',
      'cairn://kv/{key}',
    ]);
  });

  it('remembers, recalls, searches and forgets facts', async () => {
    const stored = await ok(asAlpha, 'remember', {
      namespace: 'users/42',
      key: 'language',
      value: { lang: 'Breton', note: 'prefers Breton over French' },
    });
    expect(stored).toMatchObject({ namespace: ['users', '42'], key: 'language', created: true });
    const etag = stored['etag'] as string;
    expect(await ok(asAlpha, 'recall', { namespace: 'users/42', key: 'language' })).toMatchObject({
      value: { lang: 'Breton' },
      etag,
    });
    await ok(asAlpha, 'remember', { namespace: 'users/42', key: 'city', value: 'Quimper', ttl: 3600 });

    const found = (await ok(asAlpha, 'search_memory', { namespace: 'users', text: 'breton' })) as {
      items: { key: string; score: number }[];
    };
    expect(found.items.map((item) => item.key)).toEqual(['language']);
    expect(found.items[0]?.score).toBeGreaterThan(0);
    const all = (await ok(asAlpha, 'search_memory', {})) as { items: { key: string }[] };
    expect(all.items.map((item) => item.key).sort()).toEqual(['city', 'language']);

    // Compare-and-swap: a stale ETag and a create-only write both lose, nothing written.
    const replaced = await ok(asAlpha, 'remember', {
      namespace: 'users/42',
      key: 'language',
      value: 'Breton',
      ifMatch: etag,
    });
    expect(replaced['created']).toBe(false);
    expect(
      await failure(asAlpha, 'remember', { namespace: 'users/42', key: 'language', value: 1, ifMatch: etag }),
    ).toMatchObject({ code: 'precondition_failed' });
    expect(
      await failure(asAlpha, 'remember', {
        namespace: 'users/42',
        key: 'language',
        value: 1,
        ifAbsent: true,
      }),
    ).toMatchObject({ code: 'precondition_failed' });
    expect(await ok(asAlpha, 'recall', { namespace: 'users/42', key: 'language' })).toMatchObject({
      value: 'Breton',
    });

    expect(await ok(asAlpha, 'forget', { namespace: 'users/42', key: 'language' })).toEqual({
      forgotten: true,
    });
    expect(await failure(asAlpha, 'recall', { namespace: 'users/42', key: 'language' })).toEqual({
      code: 'not_found',
      message: 'no fact is stored under this namespace and key',
    });
    expect(await ok(asAlpha, 'forget_all', { namespace: 'users' })).toMatchObject({
      deleted: 1,
      more: false,
    });
    expect(((await ok(asAlpha, 'search_memory', {})) as { items: unknown[] }).items).toEqual([]);
  });

  it('reads, writes, appends and lists keys with ETags', async () => {
    const put = await ok(asAlpha, 'kv_put', { key: 'notes/plan.md', value: '# Plan\n' });
    expect(put).toMatchObject({ key: 'notes/plan.md', size: 7, created: true });
    const appended = await ok(asAlpha, 'kv_append', { key: 'notes/plan.md', value: '- step 1\n' });
    expect(appended).toMatchObject({ size: 16, created: false });
    expect(await ok(asAlpha, 'kv_get', { key: 'notes/plan.md' })).toEqual({
      key: 'notes/plan.md',
      etag: appended['etag'],
      size: 16,
      encoding: 'utf8',
      value: '# Plan\n- step 1\n',
    });
    expect(
      await failure(asAlpha, 'kv_put', { key: 'notes/plan.md', value: 'x', ifMatch: put['etag'] }),
    ).toMatchObject({ code: 'precondition_failed' });
    expect(
      await failure(asAlpha, 'kv_put', { key: 'notes/plan.md', value: 'x', ifAbsent: true }),
    ).toMatchObject({
      code: 'precondition_failed',
    });
    await ok(asAlpha, 'kv_put', { key: 'notes/plan.md', value: 'v2', ifMatch: appended['etag'] });

    const bytes = Buffer.from([0xff, 0x00, 0xfe]);
    await ok(asAlpha, 'kv_put', { key: 'blobs/b.bin', value: bytes.toString('base64'), encoding: 'base64' });
    expect(await ok(asAlpha, 'kv_get', { key: 'blobs/b.bin' })).toMatchObject({
      encoding: 'base64',
      value: bytes.toString('base64'),
      size: 3,
    });
    // The same bytes as the HTTP route stores them.
    const http = await client(app.url, alpha.key)('/api/kv/blobs/b.bin');
    expect(Buffer.from(await http.arrayBuffer())).toEqual(bytes);

    expect(await ok(asAlpha, 'kv_list', { prefix: 'notes/' })).toEqual({
      keys: ['notes/plan.md'],
      cursor: null,
    });
    const first = (await ok(asAlpha, 'kv_list', { limit: 1 })) as { keys: string[]; cursor: string };
    expect(first.keys).toEqual(['blobs/b.bin']);
    expect(await ok(asAlpha, 'kv_list', { limit: 1, cursor: first.cursor })).toMatchObject({
      keys: ['notes/plan.md'],
    });
    expect(await failure(asAlpha, 'kv_get', { key: 'notes/none' })).toMatchObject({ code: 'not_found' });
  });

  it('claims deliveries once, and records and lists promises', async () => {
    const chatId = '19:mcp@thread.v2';
    expect(await ok(asAlpha, 'claim_deliveries', { chatId, candidateIds: ['m1', 'm2'] })).toEqual({
      claimed: ['m1', 'm2'],
      reason: null,
    });
    expect(await ok(asAlpha, 'claim_deliveries', { chatId, candidateIds: ['m2', 'm3'] })).toEqual({
      claimed: ['m3'],
      reason: null,
    });
    const promise = await ok(asAlpha, 'add_promise', {
      chatId,
      description: 'send the report',
      dueBy: '2026-12-04T17:00:00Z',
    });
    expect(promise).toMatchObject({ chatId, description: 'send the report', status: 'open' });
    expect(await ok(asAlpha, 'list_promises')).toEqual({ promises: [promise] });
    expect(await ok(asAlpha, 'list_promises', { status: 'all' })).toEqual({ promises: [promise] });
  });

  it('reads threads and checkpoints stored over HTTP', async () => {
    const http = client(app.url, alpha.key);
    const checkpoint = (checkpointId: string, parent: string | null) =>
      http('/api/threads/mcp-thread/checkpoints', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          checkpointId,
          parent,
          checkpoint: { type: 'json', data: Buffer.from(`{"id":"${checkpointId}"}`).toString('base64') },
          metadata: { source: 'loop', step: checkpointId === 'c1' ? 1 : 2 },
          channelVersions: { messages: 1 },
          values: { messages: { type: 'json', data: Buffer.from('["hi"]').toString('base64') } },
        }),
      });
    expect((await checkpoint('c1', null)).status).toBe(201);
    expect((await checkpoint('c2', 'c1')).status).toBe(201);

    const threads = (await ok(asAlpha, 'list_threads', { prefix: 'mcp-' })) as {
      threads: { threadId: string }[];
    };
    expect(threads.threads.map((thread) => thread.threadId)).toEqual(['mcp-thread']);
    expect(await ok(asAlpha, 'get_checkpoint', { threadId: 'mcp-thread' })).toMatchObject({
      checkpointId: 'c2',
      parent: 'c1',
      metadata: { source: 'loop', step: 2 },
    });
    expect(await ok(asAlpha, 'get_checkpoint', { threadId: 'mcp-thread', checkpointId: 'c1' })).toMatchObject(
      {
        checkpointId: 'c1',
        parent: null,
      },
    );
    const history = (await ok(asAlpha, 'list_checkpoints', { threadId: 'mcp-thread' })) as {
      checkpoints: { checkpointId: string }[];
    };
    expect(history.checkpoints.map((entry) => entry.checkpointId)).toEqual(['c2', 'c1']);
    const filtered = (await ok(asAlpha, 'list_checkpoints', {
      threadId: 'mcp-thread',
      filter: '{"step":1}',
    })) as { checkpoints: { checkpointId: string }[] };
    expect(filtered.checkpoints.map((entry) => entry.checkpointId)).toEqual(['c1']);
    expect(await failure(asAlpha, 'get_checkpoint', { threadId: 'no-such-thread' })).toMatchObject({
      code: 'not_found',
    });
  });

  it('lists and reads facts and keys as resources', async () => {
    await ok(asAlpha, 'remember', { namespace: 'res/a b', key: 'k/1', value: { n: 1 } });
    await ok(asAlpha, 'kv_put', { key: 'res/value.txt', value: 'hello' });
    const listed: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await asAlpha.listResources(cursor === undefined ? {} : { cursor });
      listed.push(...page.resources.map((resource) => resource.uri));
      cursor = page.nextCursor;
    } while (cursor !== undefined);
    const factUri = 'cairn://memory/res/a%20b/k%2F1';
    expect(listed).toContain(factUri);
    expect(listed).toContain('cairn://kv/res/value.txt');

    const fact = await asAlpha.readResource({ uri: factUri });
    expect(JSON.parse((fact.contents[0] as { text: string }).text)).toMatchObject({
      namespace: ['res', 'a b'],
      key: 'k/1',
      value: { n: 1 },
    });
    const value = await asAlpha.readResource({ uri: 'cairn://kv/res/value.txt' });
    expect(value.contents[0]).toMatchObject({ text: 'hello', mimeType: 'text/plain' });
    await expect(asAlpha.readResource({ uri: 'cairn://kv/res/none' })).rejects.toThrow(
      /no value is stored at this key/,
    );
    await expect(asAlpha.readResource({ uri: 'other://x' })).rejects.toThrow(/uri: must start with/);
    await expect(asAlpha.listResources({ cursor: 'nope' })).rejects.toThrow(/cursor: is not a cursor/);
  });

  it("keeps tenants apart: tenant B's tools and resources never see A's facts or keys", async () => {
    await ok(asAlpha, 'remember', { namespace: 'secret', key: 'plan', value: 'alpha only' });
    await ok(asAlpha, 'kv_put', { key: 'secret/plan', value: 'alpha only' });
    expect(await failure(asBeta, 'recall', { namespace: 'secret', key: 'plan' })).toMatchObject({
      code: 'not_found',
    });
    expect(await failure(asBeta, 'kv_get', { key: 'secret/plan' })).toMatchObject({ code: 'not_found' });
    expect(await ok(asBeta, 'search_memory', { text: 'alpha only' })).toMatchObject({ items: [] });
    expect(await ok(asBeta, 'kv_list', {})).toEqual({ keys: [], cursor: null });
    expect(await ok(asBeta, 'list_threads', {})).toMatchObject({ threads: [] });
    expect(await ok(asBeta, 'list_promises', { status: 'all' })).toEqual({ promises: [] });
    const page = await asBeta.listResources();
    expect(page.resources).toEqual([]);
    await expect(asBeta.readResource({ uri: 'cairn://memory/secret/plan' })).rejects.toThrow(/no fact/);
    // B's own write does not touch A's.
    await ok(asBeta, 'kv_put', { key: 'secret/plan', value: 'beta' });
    expect(await ok(asAlpha, 'kv_get', { key: 'secret/plan' })).toMatchObject({ value: 'alpha only' });
  });

  it('refuses a missing or wrong token with 401 before any MCP work', async () => {
    await expect(connect(app.url, undefined)).rejects.toThrow(/401|nauthorized/);
    await expect(connect(app.url, 'k_wrong')).rejects.toThrow(/401|nauthorized/);
    const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' });
    const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
    const refused = await client(app.url)('/api/mcp', { method: 'POST', headers, body });
    expect(refused.status).toBe(401);
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('unauthorized');
    const wrong = await client(app.url, 'k_wrong')('/api/mcp', { method: 'POST', headers, body });
    expect(wrong.status).toBe(401);
    // Requests the transport refuses answer the API's error JSON, naming what is wrong.
    const asAlphaHttp = client(app.url, alpha.key);
    const refusedWith = async (answer: Response) => {
      expect(answer.status).toBe(400);
      return ((await answer.json()) as { error: { code: string; message: string } }).error;
    };
    const notJson = await asAlphaHttp('/api/mcp', { method: 'POST', headers, body: 'not json' });
    expect(await refusedWith(notJson)).toMatchObject({ code: 'invalid_argument', message: /^body: / });
    const notRpc = await asAlphaHttp('/api/mcp', { method: 'POST', headers, body: '{"hello":1}' });
    expect(await refusedWith(notRpc)).toMatchObject({ code: 'invalid_argument', message: /^body: / });
    const plain = await asAlphaHttp('/api/mcp', {
      method: 'POST',
      headers: { ...headers, 'content-type': 'text/plain' },
      body,
    });
    expect(await refusedWith(plain)).toMatchObject({ code: 'invalid_argument', message: /^content-type: / });
    // Every answer is JSON, so an Accept without text/event-stream is served.
    const noAccept = await asAlphaHttp('/api/mcp', {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      body,
    });
    expect(noAccept.status).toBe(200);
    expect(((await noAccept.json()) as { result: { tools: unknown[] } }).result.tools.length).toBeGreaterThan(
      0,
    );
    // Without sessions there is no stream to open or session to end.
    const get = await client(app.url, alpha.key)('/api/mcp', { headers: { accept: 'text/event-stream' } });
    expect(get.status).toBe(405);
    expect(get.headers.get('allow')).toBe('POST');
  });

  it('answers batches with arrays, bodies without requests with 202, and refuses malformed batches', async () => {
    const post = (body: unknown, extra: Record<string, string> = {}) =>
      client(app.url, alpha.key)('/api/mcp', {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'mcp-protocol-version': '2025-11-25',
          ...extra,
        },
        body: JSON.stringify(body),
        // A request left unanswered fails here rather than at the test's own timeout.
        signal: AbortSignal.timeout(scaled(20_000)),
      });
    const ping = (id: number | string) => ({ jsonrpc: '2.0', id, method: 'ping' });
    await ok(asAlpha, 'remember', { namespace: 'batch', key: 'k', value: 'in a batch' });
    const recall = (id: number) => ({
      jsonrpc: '2.0',
      id,
      method: 'tools/call',
      params: { name: 'recall', arguments: { namespace: 'batch', key: 'k' } },
    });

    // A batch is answered with an array, in the order of its requests, even of one answer.
    const one = await post([ping('p')]);
    expect(one.status).toBe(200);
    expect(await one.json()).toEqual([{ jsonrpc: '2.0', id: 'p', result: {} }]);
    const two = await post([recall(1), { jsonrpc: '2.0', method: 'notifications/initialized' }, ping(2)]);
    const answers = (await two.json()) as { id: number; result: { structuredContent?: unknown } }[];
    expect(answers.map((answer) => answer.id)).toEqual([1, 2]);
    expect(answers[0]?.result.structuredContent).toMatchObject({ value: 'in a batch' });
    // A single message is answered with an object.
    expect(await (await post(ping(3))).json()).toEqual({ jsonrpc: '2.0', id: 3, result: {} });

    // Notifications (and responses) only: nothing to answer.
    const notified = await post({ jsonrpc: '2.0', method: 'notifications/initialized' });
    expect(notified.status).toBe(202);
    expect(await notified.text()).toBe('');

    // A cancellation cannot reach a request without sessions: it is ignored, and the request of
    // its own batch is answered (not left hanging).
    const cancelled = await post([
      recall(4),
      { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 4 } },
    ]);
    expect(cancelled.status).toBe(200);
    expect(((await cancelled.json()) as { id: number }[]).map((answer) => answer.id)).toEqual([4]);

    const refusedWith = async (answer: Response) => {
      expect(answer.status).toBe(400);
      return ((await answer.json()) as { error: { code: string; message: string } }).error.message;
    };
    expect(await refusedWith(await post([]))).toBe('body: is an empty batch');
    expect(await refusedWith(await post([ping(1), ping(2), ping(1)]))).toMatch(/^body\.2: .*id/);
    expect(await refusedWith(await post([ping(1), { hello: 1 }]))).toMatch(/^body\.1: .*JSON-RPC/);
    expect(await refusedWith(await post(Array.from({ length: 101 }, (_, index) => ping(index))))).toMatch(
      /^body: .*at most 100/,
    );
    const initialize = {
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'e2e', version: '1' } },
    };
    expect(await refusedWith(await post([initialize, ping(2)]))).toMatch(/^body: .*initialize/);
    expect(await refusedWith(await post(ping(1), { 'mcp-protocol-version': '1999-01-01' }))).toMatch(
      /^mcp-protocol-version: 1999-01-01 is not a supported protocol version/,
    );
    // Initializing negotiates the version instead: an unknown one is answered with the server's.
    const initialized = await post(initialize, { 'mcp-protocol-version': '1999-01-01' });
    expect(
      ((await initialized.json()) as { result: { serverInfo: { name: string } } }).result.serverInfo.name,
    ).toBe('cairn');
  });

  it('lists and runs admin tools for admins only', async () => {
    const asBoss = await connect(app.url, boss.key);
    const { tools } = await asBoss.listTools();
    expect(tools.map((tool) => tool.name)).toEqual([...TENANT_TOOLS, 'list_tenants']);
    const listed = (await ok(asBoss, 'list_tenants')) as { tenants: { tenant: string }[] };
    expect(listed.tenants.map((entry) => entry.tenant)).toContain(alpha.tenant);
    expect(await failure(asAlpha, 'list_tenants', {})).toEqual({
      code: 'forbidden',
      message: 'the tool list_tenants is for admins',
    });
  });

  it('answers bad arguments as tool errors naming the field, writing nothing', async () => {
    const cases: [string, Record<string, unknown>, RegExp][] = [
      ['remember', { namespace: 'bad', value: 1 }, /^key: is required$/],
      ['remember', { namespace: '/bad', key: 'k', value: 1 }, /^namespace: /],
      ['remember', { namespace: 'bad', key: 'k' }, /^value: is required/],
      ['remember', { namespace: 'bad', key: 'k', value: 1, ttl: 1.5 }, /^ttl: must be a whole number/],
      ['remember', { namespace: 'bad', key: 'k', value: 1, ttl: 0 }, /^ttl: /],
      ['remember', { namespace: 'bad', key: 'k', value: 1, ifMatch: 'nope' }, /^ifMatch: must be "\*" or/],
      [
        'remember',
        { namespace: 'bad', key: 'k', value: 1, colour: 'red' },
        /^colour: is not a known argument$/,
      ],
      // As deep as no body {"value": …} of the remember route may nest (docs/api.md, "Nesting").
      ['remember', { namespace: 'bad', key: 'k', value: { a: nested(63) } }, /^value: must not nest/],
      ['search_memory', { text: 'x', vector: [] }, /^vector: must be an array of 1 to 4096 numbers/],
      ['search_memory', { limit: 0 }, /^limit: /],
      ['kv_put', { key: 'a/../b', value: 'x' }, /^key: /],
      ['kv_put', { key: 'bad', value: 'x', ifMatch: '"e"', ifAbsent: true }, /^ifMatch: cannot be combined/],
      ['kv_put', { key: 'bad', value: '***', encoding: 'base64' }, /^value: must be base64/],
      ['kv_list', { limit: 0 }, /^limit: must be a whole number from 1 to 5000$/],
      [
        'claim_deliveries',
        { chatId: '19:x@thread.v2', candidateIds: ['ok', ''] },
        /^candidateIds\.1: must not be empty$/,
      ],
      ['claim_deliveries', { chatId: '', candidateIds: ['m1'] }, /^chatId: /],
      ['add_promise', { chatId: 'c', description: 'd', dueBy: 'tomorrow' }, /^dueBy: must be an RFC 3339/],
      ['list_promises', { status: 'closed' }, /^status: must be "open" or "all"$/],
      ['list_checkpoints', { threadId: 't', filter: '[1]' }, /^filter: must be a JSON object/],
      ['list_threads', { limit: 5000 }, /^limit: must be a whole number from 1 to 1000$/],
    ];
    for (const [name, args, message] of cases) {
      const error = await failure(asAlpha, name, args);
      expect(error.code, `${name} ${JSON.stringify(args)}`).toBe('invalid_argument');
      expect(error.message, `${name} ${JSON.stringify(args)}`).toMatch(message);
    }
    expect(await failure(asAlpha, 'no_such_tool', {})).toMatchObject({ code: 'not_found' });
    expect(await ok(asAlpha, 'search_memory', { namespace: 'bad' })).toMatchObject({ items: [] });
    expect(await ok(asAlpha, 'kv_list', { prefix: 'bad' })).toEqual({ keys: [], cursor: null });
  });
});

describe('MCP claims across two app instances on one Azurite', () => {
  const tenant = newTenant('mcp-fleet');
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

  it('delivers each id exactly once over 16 concurrent claim_deliveries calls, 8 per instance', async () => {
    const clients = [await connect(first.url, tenant.key), await connect(second.url, tenant.key)];
    const chatId = '19:fleet@thread.v2';
    const offered = Array.from({ length: 40 }, (_, i) => `m${String(i).padStart(2, '0')}`);
    const claimed = await Promise.all(
      Array.from({ length: 16 }, async (_, claimer) => {
        const mcp = clients[claimer % 2] as Client;
        // Each claimer offers the same ids in its own order; after contention it claims again.
        const mine = [...offered.slice(claimer), ...offered.slice(0, claimer)];
        const got: string[] = [];
        for (let round = 0; round < 10; round++) {
          const answer = (await ok(mcp, 'claim_deliveries', { chatId, candidateIds: mine })) as {
            claimed: string[];
            reason: string | null;
          };
          expect(answer.reason === null || answer.reason === 'contention').toBe(true);
          got.push(...answer.claimed);
          if (answer.reason === null) break;
        }
        return got;
      }),
    );
    expect(claimed.flat().sort()).toEqual(offered);
  });
});

describe('MCP body limit', () => {
  const tenant = newTenant('mcp-limit');
  let app: RunningApp;
  const maxValueBytes = 3000;

  beforeAll(async () => {
    app = await startApp({
      CAIRN_API_KEYS: apiKeysSetting([tenant]),
      CAIRN_MAX_VALUE_BYTES: String(maxValueBytes),
      ...backendSettings('local', azurite().blobEndpoint),
    });
  });
  afterAll(async () => {
    await app.stop();
  });

  it('follows CAIRN_MAX_VALUE_BYTES: a value of that size as base64 plus 64 KiB, larger bodies 413', async () => {
    const limit = Math.ceil(maxValueBytes / 3) * 4 + 64 * 1024;
    const ping = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' });
    const post = (size: number) =>
      client(app.url, tenant.key)('/api/mcp', {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'mcp-protocol-version': '2025-11-25',
        },
        // JSON allows whitespace after the message: the body is exactly `size` bytes.
        body: ping + ' '.repeat(size - ping.length),
      });
    const atLimit = await post(limit);
    expect(atLimit.status).toBe(200);
    expect(await atLimit.json()).toEqual({ jsonrpc: '2.0', id: 1, result: {} });
    const over = await post(limit + 1);
    expect(over.status).toBe(413);
    expect(((await over.json()) as { error: { code: string } }).error.code).toBe('payload_too_large');
  });
});
