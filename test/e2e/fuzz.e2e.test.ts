import { createHash, randomBytes, randomUUID } from 'node:crypto';
import http from 'node:http';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { AZURITE_ACCOUNT_KEY } from '../../dev/azurite';
import {
  apiKeysSetting,
  backendSettings,
  newTenant,
  type RunningApp,
  startApp,
  type TestTenant,
} from '../support/app';
import { azurite } from '../support/azurite';
import { casesFor, type FuzzCase, type Operation, operationsOf, Random } from '../support/fuzz';
import { AnswerChecker } from '../support/openapiContract';
import {
  snapshotDifferences,
  type StorageSnapshot,
  type StorageSpec,
  takeSnapshot,
} from '../support/storageSnapshot';
import { scaled } from '../support/timeouts';

/**
 * The fuzz test: every operation of the OpenAPI document the app serves (`GET /api/openapi.json`,
 * so a new route is fuzzed as soon as it is documented) gets seeded, malformed requests: path
 * parameters with dot segments (raw, `%2e%2e`, overlong `%C0%AE`), backslashes, NUL, malformed
 * percent-encoding (`%FF`, `%zz`, lone surrogates `%ED%A0%80`), noncharacters (U+FFFE, U+FFFF,
 * U+FDD0), right-to-left marks and over-long names; query parameters of the wrong type and huge
 * numbers (`1e309`, `2**64`, `-0`); bodies that are malformed JSON, invalid UTF-8, of the wrong
 * type field by field, 10,000 levels deep, one byte over the route's limit (with and without
 * Content-Length) or labelled with another content type; preconditions and request ids that are
 * malformed; no, malformed or unknown credentials, a tenant's, and an admin's for admin routes.
 *
 * Every answer must come within {@link REQUEST_TIMEOUT_MS}, be below 500 (but for the documented
 * 501 `not_configured` of a part the configuration leaves off, see isNotConfigured), carry the error JSON
 * (`{"error":{"code","message"}}`) when it is 4xx, and be as the document says (status, headers,
 * body); the app must still run at the end. Cases are sent in batches; when every request of a
 * batch was refused (4xx) or only read (a 2xx to GET or HEAD), the storage (every file under the
 * data folder, every entity of the app's tables, every blob of its containers) must be exactly as
 * before the batch: a refused request writes nothing.
 *
 * The run is seeded (`CAIRN_FUZZ_SEED`, default {@link DEFAULT_SEED}): the same seed sends the same
 * requests, and every failure names it. The local backend (with its tables on Azurite, the audit
 * trail and encryption keys on) gets every operation; the Blob backend gets the key/value and
 * listing routes; a local backend without tables, audit or encryption keys gets every operation
 * too, a few times each. A few thousand requests in all.
 *
 * Before the run both callers write once in every domain. The tenant directory records a tenant
 * before its first write in a domain, also one that is then refused (shared/tenants/tenantDirectory.ts:
 * a record may name a domain that holds nothing, never the other way round); the warm-up makes
 * those records, so that the comparison holds every refused request to writing nothing at all.
 */

const DEFAULT_SEED = 20261201;
const SEED = Number(process.env['CAIRN_FUZZ_SEED'] ?? DEFAULT_SEED);
/** Cases per operation (oversize bodies of the large routes make a few of them heavy). */
const CASES_PER_OPERATION = 30;
/** The Blob backend gets few operations: each meets every path and query edge, and more drawn cases. */
const BLOB_CASES_PER_OPERATION = 40;
/** With the optional features off (no tables, audit or encryption keys), fewer cases per operation. */
const BARE_CASES_PER_OPERATION = 6;
/** Small, so that many batches are all refused (one accepted write makes a batch uncomparable). */
const BATCH_SIZE = 4;
const CONCURRENCY = 4;
/** Generous: the machine running the tests may be loaded. A hang is anything longer. */
const REQUEST_TIMEOUT_MS = scaled(20_000);
/** Test timeouts: the local fuzz, and each of the smaller ones (bare, Blob). */
const LONG_MS = scaled(240_000);
const SHORT_MS = scaled(120_000);
/**
 * Operations that may wait by design, with their documented longest wait: a run start waits up to
 * `busyTimeout` seconds (at most 60, docs/threads.md) for a busy thread.
 */
const DOCUMENTED_WAITS_MS: Readonly<Record<string, number>> = {
  'POST /api/threads/{threadId}/runs': 60_000,
};
/** Failures shown in the message (all are counted). */
const SHOWN = 15;
/** Never run: a year apart, so that no timer writes while a batch is compared. */
const NEVER = '0 0 0 1 1 *';

interface Reply {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** Sends `fuzzCase` with its path exactly as given; an error or no answer in time is a failure. */
function send(
  baseUrl: string,
  fuzzCase: FuzzCase,
  authorization: string | undefined,
): Promise<Reply | string> {
  const { hostname, port } = new URL(baseUrl);
  const headers: Record<string, string> = { ...fuzzCase.headers };
  if (authorization !== undefined) headers['authorization'] = authorization;
  if (fuzzCase.body !== undefined && fuzzCase.chunked !== true) {
    headers['content-length'] = String(fuzzCase.body.length);
  }
  return new Promise((resolve) => {
    let settled = false;
    const done = (result: Reply | string) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(result);
    };
    let request: http.ClientRequest;
    try {
      request = http.request({ hostname, port, path: fuzzCase.path, method: fuzzCase.method, headers });
    } catch (error) {
      // The generator made a request Node cannot send: a bug of the test, reported as such.
      resolve(`the test could not send it: ${String(error)}`);
      return;
    }
    const bound = REQUEST_TIMEOUT_MS + (DOCUMENTED_WAITS_MS[`${fuzzCase.method} ${fuzzCase.route}`] ?? 0);
    const timer = setTimeout(() => {
      done(`no answer within ${bound} ms`);
      request.destroy();
    }, bound);
    request.on('response', (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () =>
        done({
          status: response.statusCode ?? 0,
          headers: response.headers,
          body: Buffer.concat(chunks).toString(),
        }),
      );
      response.on('error', (error) => done(`the answer broke off: ${error.message}`));
    });
    // An answer that came before the whole body was sent (an early 413) stands; otherwise the
    // connection failed: reset, closed or refused.
    request.on('error', (error) => done(`no answer: ${error.message}`));
    request.end(fuzzCase.body);
  });
}

function describeCase(fuzzCase: FuzzCase): string {
  return `${fuzzCase.method} ${fuzzCase.path.length > 200 ? `${fuzzCase.path.slice(0, 200)}…` : fuzzCase.path} as ${fuzzCase.caller} (${fuzzCase.what})`;
}

/** Runs `tasks` with at most `limit` at a time, in order. */
async function pooled<T>(
  items: readonly T[],
  limit: number,
  task: (item: T, index: number) => Promise<void>,
) {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) {
        const index = next++;
        await task(items[index] as T, index);
      }
    }),
  );
}

function shuffle<T>(items: T[], random: Random): T[] {
  for (let index = items.length - 1; index > 0; index--) {
    const other = random.int(index + 1);
    [items[index], items[other]] = [items[other] as T, items[index] as T];
  }
  return items;
}

/**
 * The one 5xx a request may get: 501 `not_configured` naming the setting, the documented answer of
 * a part the configuration leaves off (docs/api.md). Configuration decides it, never the request:
 * the same request answers it whatever it carries, and the document lists it on those operations
 * (the answer check below holds it to that).
 */
function isNotConfigured(reply: Reply): boolean {
  if (reply.status !== 501) return false;
  try {
    const { error } = JSON.parse(reply.body) as { error?: { code?: unknown; setting?: unknown } };
    return (
      error?.code === 'not_configured' &&
      typeof error.setting === 'string' &&
      error.setting.startsWith('CAIRN_')
    );
  } catch {
    return false;
  }
}

/** The problems of one answer: a 5xx, no error JSON on a 4xx, or a difference from the document. */
function problemsOf(fuzzCase: FuzzCase, reply: Reply, checker: AnswerChecker): string[] {
  const problems: string[] = [];
  if ((reply.status >= 500 && !isNotConfigured(reply)) || reply.status < 100) {
    problems.push(`status ${reply.status}: ${reply.body.slice(0, 300)}`);
  }
  const isJson = /^application\/json\b/i.test(String(reply.headers['content-type'] ?? ''));
  let json: unknown;
  if (isJson && reply.body !== '') {
    try {
      json = JSON.parse(reply.body) as unknown;
    } catch {
      problems.push(`status ${reply.status}: the body is not JSON: ${reply.body.slice(0, 200)}`);
    }
  }
  if (reply.status >= 400 && reply.status < 500 && fuzzCase.method !== 'HEAD') {
    const error = (json as { error?: { code?: unknown; message?: unknown } } | undefined)?.error;
    if (!isJson || typeof error?.code !== 'string' || typeof error.message !== 'string') {
      problems.push(`status ${reply.status} without the error JSON: ${reply.body.slice(0, 200)}`);
    }
  }
  const header = (name: string) => {
    const value = reply.headers[name.toLowerCase()];
    return Array.isArray(value) ? value.join(', ') : value;
  };
  problems.push(
    ...checker.check({
      method: fuzzCase.method,
      path: fuzzCase.path,
      status: reply.status,
      header,
      json: isJson ? (json ?? reply.body) : undefined,
    }),
  );
  return problems;
}

interface Failure {
  /** `METHOD /documented/path`, or `storage`. */
  readonly operation: string;
  readonly request: string;
  readonly problem: string;
}

interface Target {
  readonly name: string;
  readonly app: RunningApp;
  readonly storage: StorageSpec;
  readonly tenant: TestTenant;
  readonly admin: TestTenant;
}

function authorizationOf(target: Target, fuzzCase: FuzzCase, random: Random): string | undefined {
  switch (fuzzCase.caller) {
    case 'tenant':
      return `Bearer ${target.tenant.key}`;
    case 'admin':
      return `Bearer ${target.admin.key}`;
    case 'none':
      return undefined;
    case 'unknown':
      return `Bearer k_unknown${random.int(1_000_000)}`;
    case 'malformed':
      return random.pick([
        'Bearer',
        'Bearer ',
        'Basic YTpi',
        `Bearer ${'x'.repeat(6000)}`,
        `bearer  ${target.tenant.key}`,
        `Bearer ${target.tenant.key}x`,
        'Bearer \u00ff\u00fe',
        'Bearer a.b.c',
        'Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.',
      ]);
  }
}

/** A batch whose every request was refused or only read: storage must not have changed. */
function refusedOrRead(fuzzCase: FuzzCase, result: Reply | string): boolean {
  if (typeof result === 'string') return false;
  if ((result.status >= 400 && result.status < 500) || isNotConfigured(result)) return true;
  return result.status < 400 && (fuzzCase.method === 'GET' || fuzzCase.method === 'HEAD');
}

function errorText(error: unknown): string {
  const { name, message, statusCode } = error as { name?: string; message?: string; statusCode?: number };
  return `${name ?? 'error'}${statusCode === undefined ? '' : ` ${statusCode}`}: ${(message ?? String(error)).slice(0, 200)}`;
}

/**
 * Waits until the job at `location` (a 202's status URL) is completed or failed, so that it writes
 * nothing while a later batch is compared; its problem, or undefined.
 */
async function jobFinished(location: string, admin: TestTenant): Promise<string | undefined> {
  for (let attempt = 0; attempt < 300; attempt++) {
    const response = await fetch(location, { headers: { authorization: `Bearer ${admin.key}` } });
    if (response.status !== 200) return `the job at ${location} answers ${response.status}`;
    const { status } = (await response.json()) as { status?: string };
    if (status === 'completed' || status === 'failed') return undefined;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return `the job at ${location} did not finish`;
}

async function fuzz(
  target: Target,
  operations: readonly Operation[],
  document: Record<string, unknown>,
  casesPerOperation: number,
  everyEdge = false,
) {
  const random = new Random(SEED);
  const checker = new AnswerChecker(document);
  const cases = shuffle(
    operations.flatMap((operation) =>
      casesFor(document, operation, random, casesPerOperation, { everyEdge }),
    ),
    random,
  );
  const began = Date.now();
  const failures: Failure[] = [];
  const fail = (fuzzCase: FuzzCase | undefined, problem: string) =>
    failures.push({
      operation: fuzzCase === undefined ? 'storage' : `${fuzzCase.method} ${fuzzCase.route}`,
      request: fuzzCase === undefined ? 'the app' : describeCase(fuzzCase),
      problem,
    });
  const statuses = new Map<number, number>();
  let compared = 0;
  // Credentials are drawn here, in order, so that the seed alone decides every request.
  const authorizations = cases.map((fuzzCase) => authorizationOf(target, fuzzCase, random));
  let baseline = await takeSnapshot(target.storage);
  let listable = true;
  for (let start = 0; start < cases.length; start += BATCH_SIZE) {
    const batch = cases.slice(start, start + BATCH_SIZE);
    const results: (Reply | string)[] = [];
    await pooled(batch, CONCURRENCY, async (fuzzCase, index) => {
      const result = await send(target.app.url, fuzzCase, authorizations[start + index]);
      results[index] = result;
      if (typeof result === 'string') {
        fail(fuzzCase, result);
        return;
      }
      statuses.set(result.status, (statuses.get(result.status) ?? 0) + 1);
      for (const problem of problemsOf(fuzzCase, result, checker)) {
        fail(fuzzCase, problem);
      }
    });
    const listing = () =>
      batch
        .map((fuzzCase, index) => {
          const result = results[index];
          return `${describeCase(fuzzCase)} → ${typeof result === 'string' ? result : result?.status}`;
        })
        .join('\n      ');
    // Jobs a batch started (202, their status at Location) finish before storage is read again.
    for (const result of results) {
      if (
        typeof result !== 'string' &&
        result.status === 202 &&
        typeof result.headers.location === 'string'
      ) {
        const problem = await jobFinished(result.headers.location, target.admin);
        if (problem !== undefined) fail(undefined, `${problem}; the batch:\n      ${listing()}`);
      }
    }
    if (listable === false) continue;
    let after: StorageSnapshot;
    try {
      after = await takeSnapshot(target.storage);
    } catch (error) {
      // What the app stored breaks the storage's own listing: reported, and nothing more compared.
      fail(
        undefined,
        `storage could not be listed after this batch (${errorText(error)}); the batch:\n      ${listing()}`,
      );
      listable = false;
      continue;
    }
    if (batch.every((fuzzCase, index) => refusedOrRead(fuzzCase, results[index] ?? ''))) {
      const changed = snapshotDifferences(baseline, after);
      compared++;
      if (changed.length > 0) {
        fail(
          undefined,
          `a batch of refused requests changed storage (${changed.slice(0, 5).join('; ')}${changed.length > 5 ? '; …' : ''}); the batch:\n      ${listing()}`,
        );
      }
    }
    baseline = after;
  }
  const alive = target.app.child.exitCode === null && target.app.child.signalCode === null;
  if (!alive) fail(undefined, `the app exited during the run:\n${target.app.output().slice(-2000)}`);
  const summary = `${target.name}: ${cases.length} requests in ${Math.round((Date.now() - began) / 1000)} s, seed ${SEED} (CAIRN_FUZZ_SEED), statuses ${JSON.stringify(Object.fromEntries([...statuses].sort(([a], [b]) => a - b)))}, ${compared} batches compared`;
  return { failures, summary, compared, total: cases.length };
}

/** The failures, one of each kind (operation and problem) with how often it happened. */
function report(result: { failures: Failure[]; summary: string }): string {
  const kinds = new Map<string, { first: Failure; count: number }>();
  for (const failure of result.failures) {
    const kind = `${failure.operation} ${failure.problem.replace(/[:(].*$/s, '')}`;
    const known = kinds.get(kind);
    if (known === undefined) kinds.set(kind, { first: failure, count: 1 });
    else known.count++;
  }
  const shown = [...kinds.values()]
    .slice(0, SHOWN)
    .map(
      ({ first, count }) => `  - ${first.request}: ${first.problem}${count > 1 ? ` (${count} times)` : ''}`,
    );
  const more = kinds.size > SHOWN ? [`  … and ${kinds.size - SHOWN} more kinds`] : [];
  return [
    `${result.summary}: ${result.failures.length} failures of ${kinds.size} kinds`,
    ...shown,
    ...more,
  ].join('\n');
}

async function fetchDocument(app: RunningApp): Promise<Record<string, unknown>> {
  const response = await fetch(`${app.url}/api/openapi.json`);
  expect(response.status).toBe(200);
  return (await response.json()) as Record<string, unknown>;
}

async function warmUp(
  app: RunningApp,
  tenant: TestTenant,
  requests: readonly [string, string, string | Buffer, string?][],
) {
  for (const [method, path, body, contentType] of requests) {
    const response = await fetch(`${app.url}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${tenant.key}`,
        'content-type': contentType ?? 'application/octet-stream',
      },
      ...(method === 'GET' ? {} : { body }),
    });
    expect(response.status, `warm-up ${method} ${path}: ${await response.text()}`).toBeLessThan(300);
  }
}

/**
 * Writes once in every domain (so that the tenant directory has recorded the tenant: that record
 * precedes the first write of a domain, also one that is then refused) and leaves objects under the
 * names the generator uses (`fuzz1`), so that cases meet existing state too.
 */
function warmUpRequests(full: boolean, session: string): [string, string, string | Buffer, string?][] {
  const part = Buffer.from('fuzz part');
  const sha = createHash('sha256').update(part).digest('hex');
  const kv: [string, string, string][] = [
    ['PUT', '/api/kv/fuzz1', 'seed'],
    ['PUT', '/api/kv/notes/a.txt', 'seed'],
  ];
  if (!full) return kv;
  return [
    ...kv,
    ['PUT', '/api/threads/fuzz1', ''],
    ['PUT', '/api/memory/facts?namespace=fuzz1&key=k1', '{"value":{"a":1}}', 'application/json'],
    ['PUT', `/api/sessions/${session}/objects/tails/c1/g1`, 'tail'],
    ['PUT', `/api/workspaces/fuzz1/snapshots/objects/${sha}/0`, part],
    [
      'POST',
      '/api/interactions',
      '{"channel":"email","direction":"inbound","sender":"a","summary":"s"}',
      'application/json',
    ],
  ];
}

describe('fuzzing every documented route', () => {
  const tenant = newTenant('fuzz');
  const admin = newTenant('fuzzadmin', true);
  const tableEndpoint = () => azurite().tableEndpoint;
  let local: Target;
  let blob: Target;
  let bare: Target;

  beforeAll(async () => {
    const suffix = randomUUID().replaceAll('-', '').slice(0, 16);
    const tables = {
      session: `fuzzsessions${suffix}`,
      memory: `fuzzmemory${suffix}`,
      audit: `fuzzaudit${suffix}`,
    };
    const common = {
      CAIRN_API_KEYS: apiKeysSetting([tenant, admin]),
      CAIRN_EMAIL_POLL_SCHEDULE: NEVER,
      CAIRN_PRUNE_SCHEDULE: NEVER,
      CAIRN_AUDIT_SIGN_SCHEDULE: NEVER,
      CAIRN_LOG_LEVEL: 'warn',
    };
    const localSettings = backendSettings('local', '');
    const bareSettings = backendSettings('local', '');
    const [localApp, blobApp, bareApp] = await Promise.all([
      startApp({
        ...common,
        ...localSettings,
        CAIRN_TABLE_ENDPOINT: tableEndpoint(),
        CAIRN_STORAGE_ACCOUNT_KEY: AZURITE_ACCOUNT_KEY,
        CAIRN_SESSION_TABLE: tables.session,
        CAIRN_MEMORY_TABLE: tables.memory,
        CAIRN_AUDIT: 'true',
        CAIRN_AUDIT_TABLE: tables.audit,
        CAIRN_ENCRYPTION_KEYS: `k1:${randomBytes(32).toString('hex')}`,
      }),
      (async () => {
        const settings = backendSettings('blob', azurite().blobEndpoint);
        const app = await startApp({ ...common, ...settings });
        return { app, container: settings['CAIRN_BLOB_CONTAINER'] ?? '' };
      })(),
      startApp({ ...common, ...bareSettings }),
    ]);
    bare = {
      name: 'local backend without tables, audit or encryption',
      app: bareApp,
      tenant,
      admin,
      storage: { dataDir: bareSettings['CAIRN_DATA_DIR'] ?? '' },
    };
    local = {
      name: 'local backend',
      app: localApp,
      tenant,
      admin,
      storage: {
        dataDir: localSettings['CAIRN_DATA_DIR'] ?? '',
        tableEndpoint: tableEndpoint(),
        tables: Object.values(tables),
      },
    };
    blob = {
      name: 'Blob backend',
      app: blobApp.app,
      tenant,
      admin,
      storage: { blobEndpoint: azurite().blobEndpoint, container: blobApp.container },
    };
    // The admin's session is another one: `fuzz1` is the tenant's, and the admin's writes to it are 403.
    for (const [caller, session] of [
      [tenant, 'fuzz1'],
      [admin, 'fuzz2'],
    ] as const) {
      await warmUp(local.app, caller, warmUpRequests(true, session));
      await warmUp(blob.app, caller, warmUpRequests(false, session));
    }
  });
  afterAll(async () => {
    await Promise.all([local?.app.stop(), blob?.app.stop(), bare?.app.stop()]);
  });

  it(
    'answers every case of every route of the local backend below 500, in time, and writes nothing when it refuses',
    async () => {
      const document = await fetchDocument(local.app);
      const operations = operationsOf(document);
      expect(operations.length).toBeGreaterThan(50);
      const result = await fuzz(local, operations, document, CASES_PER_OPERATION);
      expect(result.failures.length, report(result)).toBe(0);
      expect(result.compared, result.summary).toBeGreaterThan(0);
    },
    LONG_MS,
  );

  it(
    'does the same with the optional features off (their routes answer 501 not_configured, no other 5xx)',
    async () => {
      const document = await fetchDocument(bare.app);
      const result = await fuzz(bare, operationsOf(document), document, BARE_CASES_PER_OPERATION);
      expect(result.failures.length, report(result)).toBe(0);
      expect(result.compared, result.summary).toBeGreaterThan(0);
    },
    SHORT_MS,
  );

  it(
    'does the same for the key/value and listing routes on the Blob backend',
    async () => {
      const document = await fetchDocument(blob.app);
      const operations = operationsOf(document).filter(
        (operation) => operation.path.startsWith('/api/kv/') || operation.path === '/api/keys',
      );
      expect(operations.length).toBeGreaterThan(5);
      const result = await fuzz(blob, operations, document, BLOB_CASES_PER_OPERATION, true);
      expect(result.failures.length, report(result)).toBe(0);
      expect(result.compared, result.summary).toBeGreaterThan(0);
    },
    SHORT_MS,
  );
});
