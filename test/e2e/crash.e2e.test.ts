import { readdirSync, readFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';

import { ArchiveClient } from '@cairn-state/client';
import { afterEach, describe, expect, it } from 'vitest';

import { stopProcess } from '../support/app';
import { onCleanUp, tempDir } from '../support/cleanup';
import { type Started, startNpmStart, stopNpmStarts } from '../support/npmStart';

/**
 * What the embedded default (`npm start`, local profile) promises: every write answered 2xx
 * survives SIGKILL of any process it started (the app, or its Azurite) and a restart, and nothing
 * half-written is ever visible. A stream of writes of every kind runs against `npm start`; once a
 * fixed number of them is acknowledged the target is killed with SIGKILL; `npm start` is started
 * again on the same project folder and every acknowledged write is looked for. The counts per kind
 * are printed (acknowledged, found after the restart).
 */
afterEach(stopNpmStarts);

/**
 * Acknowledged writes before the kill (and at least one of each kind: an archive publish is slower
 * than a key/value put): a count, not a time, so that the run is deterministic.
 */
const KILL_AFTER = 48;
const WORKERS = 2;

/** The pids of `pid`'s child processes (Linux /proc). */
function childrenOf(pid: number): number[] {
  const found: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      // The fields after the command (which is in parentheses and may hold spaces): state, ppid.
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === pid) found.push(Number(entry));
    } catch {
      // The process ended meanwhile.
    }
  }
  return found;
}

function killPid(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // Gone already.
  }
}

/** `npm start`'s Azurite: its child process running Azurite (the local runtime serves in its own). */
function azuritePidOf(started: Started): number {
  const children = childrenOf(started.child.pid ?? -1).filter((pid) =>
    readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('azurite'),
  );
  expect(children).toHaveLength(1);
  const pid = children[0] ?? -1;
  onCleanUp(async () => killPid(pid));
  return pid;
}

interface Acknowledged {
  puts: Map<string, string>;
  /** Per key, the lines acknowledged, in order; `attempted` also counts the one in flight. */
  appends: Map<string, { acked: number; attempted: number }>;
  /** Per session, the checkpoints acknowledged in order, and the one in flight. */
  archives: Map<string, { acked: string[]; inFlight: string | null }>;
  threads: Map<string, { acked: string[]; inFlight: string | null }>;
  facts: Map<string, number>;
}

const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64');

function checkpointBody(checkpointId: string, parent: string | null, step: number): string {
  return JSON.stringify({
    checkpointId,
    parent,
    checkpoint: { type: 'json', data: b64({ v: 4, id: checkpointId }) },
    metadata: { source: 'loop', step },
    channelVersions: { messages: step + 1 },
    values: { messages: { type: 'json', data: b64([`step ${step}`]) } },
  });
}

/**
 * Writes of every kind, WORKERS of each in parallel, until `kill` has run (after KILL_AFTER
 * acknowledgements) and every request in flight has ended; returns what was acknowledged.
 */
async function writeUntilKilled(
  cwd: string,
  url: string,
  key: string,
  kill: () => void,
): Promise<Acknowledged> {
  const acked: Acknowledged = {
    puts: new Map(),
    appends: new Map(),
    archives: new Map(),
    threads: new Map(),
    facts: new Map(),
  };
  let count = 0;
  const kinds = new Set<string>();
  let killed = false;
  const headers = { authorization: `Bearer ${key}` };
  /** Kills once KILL_AFTER writes are acknowledged and every kind has at least one among them. */
  const acknowledge = (kind: 'put' | 'append' | 'archive' | 'thread' | 'fact') => {
    count++;
    kinds.add(kind);
    if (count >= KILL_AFTER && kinds.size === 5 && !killed) {
      killed = true;
      kill();
    }
  };
  const send = async (pathname: string, init: RequestInit): Promise<boolean> => {
    const response = await fetch(`${url}${pathname}`, { ...init, headers: { ...headers, ...init.headers } });
    await response.arrayBuffer();
    if (response.status >= 300) throw new Error(`${init.method} ${pathname}: ${response.status}`);
    return true;
  };
  /** Runs `step` 0, 1, 2 … until the kill; a step that fails after the kill ends the worker. */
  const loop = async (step: (n: number) => Promise<void>) => {
    for (let n = 0; !killed; n++) {
      try {
        await step(n);
      } catch (error) {
        if (killed) return;
        throw error;
      }
    }
  };
  const workers: Promise<void>[] = [];
  for (let w = 0; w < WORKERS; w++) {
    workers.push(
      loop(async (n) => {
        const keyName = `crash/put/${w}-${n}`;
        await send(`/api/kv/${keyName}`, { method: 'PUT', body: `value ${w}-${n}` });
        acked.puts.set(keyName, `value ${w}-${n}`);
        acknowledge('put');
      }),
      loop(async (n) => {
        const keyName = `crash/append/${w}`;
        const entry = acked.appends.get(keyName) ?? { acked: 0, attempted: 0 };
        acked.appends.set(keyName, entry);
        entry.attempted = n + 1;
        await send(`/api/kv/${keyName}`, { method: 'POST', body: `${w}:${n}\n` });
        entry.acked = n + 1;
        acknowledge('append');
      }),
      loop(async (n) => {
        const sessionId = `crash-s${w}`;
        const entry = acked.archives.get(sessionId) ?? { acked: [], inFlight: null };
        acked.archives.set(sessionId, entry);
        const dir = path.join(cwd, 'publish', `${w}-${n}`);
        await mkdir(dir, { recursive: true });
        await writeFile(path.join(dir, 'events.jsonl'), `{"turn":${n}}\n`);
        entry.inFlight = `c${n}`;
        const archive = new ArchiveClient({ url, token: key, attempts: 1 });
        await archive.publishCheckpoint(dir, sessionId, {
          checkpointId: `c${n}`,
          parent: entry.acked.at(-1) ?? null,
          data: { turn: n },
        });
        entry.acked.push(`c${n}`);
        acknowledge('archive');
      }),
      loop(async (n) => {
        const threadId = `crash-t${w}`;
        const entry = acked.threads.get(threadId) ?? { acked: [], inFlight: null };
        acked.threads.set(threadId, entry);
        if (n === 0) await send(`/api/threads/${threadId}`, { method: 'PUT' });
        entry.inFlight = `c${n}`;
        await send(`/api/threads/${threadId}/checkpoints`, {
          method: 'POST',
          body: checkpointBody(`c${n}`, entry.acked.at(-1) ?? null, n),
        });
        entry.acked.push(`c${n}`);
        acknowledge('thread');
      }),
      loop(async (n) => {
        const factKey = `f${w}-${n}`;
        const query = new URLSearchParams({ namespace: 'crash', key: factKey }).toString();
        await send(`/api/memory/facts?${query}`, {
          method: 'PUT',
          body: JSON.stringify({ value: { n } }),
          headers: { 'content-type': 'application/json' },
        });
        acked.facts.set(factKey, n);
        acknowledge('fact');
      }),
    );
  }
  await Promise.all(workers);
  return acked;
}

interface Count {
  readonly kind: string;
  readonly acknowledged: number;
  readonly found: number;
}

/** Looks for every acknowledged write on the restarted service; returns the counts per kind. */
async function findAfterRestart(url: string, key: string, acked: Acknowledged): Promise<Count[]> {
  const headers = { authorization: `Bearer ${key}` };
  const get = (pathname: string) => fetch(`${url}${pathname}`, { headers });
  const counts: Count[] = [];

  let found = 0;
  for (const [keyName, value] of acked.puts) {
    const response = await get(`/api/kv/${keyName}`);
    if (response.status === 200 && (await response.text()) === value) found++;
  }
  counts.push({ kind: 'kv put', acknowledged: acked.puts.size, found });

  let appended = 0;
  found = 0;
  for (const [keyName, { acked: lines, attempted }] of acked.appends) {
    appended += lines;
    const response = await get(`/api/kv/${keyName}`);
    const text = response.status === 200 ? await response.text() : '';
    const w = keyName.split('/').at(-1);
    // Whole lines only, in order, from the first: the acknowledged ones and at most the one in flight.
    const stored = text === '' ? [] : text.replace(/\n$/, '').split('\n');
    expect(text === '' || text.endsWith('\n'), `${keyName} ends in a whole line`).toBe(true);
    expect(stored).toEqual(Array.from({ length: stored.length }, (_, n) => `${w}:${n}`));
    expect(stored.length).toBeLessThanOrEqual(attempted);
    found += Math.min(stored.length, lines);
  }
  counts.push({ kind: 'kv append', acknowledged: appended, found });

  for (const [kind, entries, route] of [
    ['archive checkpoint', acked.archives, 'sessions'],
    ['thread checkpoint', acked.threads, 'threads'],
  ] as const) {
    let total = 0;
    found = 0;
    for (const [id, { acked: checkpoints, inFlight }] of entries) {
      total += checkpoints.length;
      for (const checkpointId of checkpoints) {
        if ((await get(`/api/${route}/${id}/checkpoints/${checkpointId}`)).status === 200) found++;
      }
      // The head is the last acknowledged checkpoint, or the one in flight: never an older one.
      const latest = await get(`/api/${route}/${id}/checkpoints/latest`);
      if (checkpoints.length > 0) {
        expect(latest.status, `${route}/${id} latest`).toBe(200);
        const body = (await latest.json()) as { checkpointId: string };
        expect([checkpoints.at(-1), inFlight]).toContain(body.checkpointId);
      }
    }
    counts.push({ kind, acknowledged: total, found });
  }

  // The session index lists every session with an acknowledged checkpoint, at its head.
  const sessions = (await (await get('/api/sessions?limit=100')).json()) as {
    sessions: { id: string; checkpointId: string }[];
  };
  const withCheckpoints = [...acked.archives].filter(([, entry]) => entry.acked.length > 0);
  found = withCheckpoints.filter(([id, entry]) =>
    sessions.sessions.some(
      (session) => session.id === id && [entry.acked.at(-1), entry.inFlight].includes(session.checkpointId),
    ),
  ).length;
  counts.push({ kind: 'session index entry', acknowledged: withCheckpoints.length, found });

  found = 0;
  for (const [factKey, n] of acked.facts) {
    const query = new URLSearchParams({ namespace: 'crash', key: factKey }).toString();
    const response = await get(`/api/memory/facts?${query}`);
    if (response.status === 200 && ((await response.json()) as { value: { n: number } }).value.n === n)
      found++;
  }
  counts.push({ kind: 'memory fact', acknowledged: acked.facts.size, found });

  // The audit trail: whole and unbroken; every acknowledged fact's write recorded.
  const verify = (await (await get('/api/audit/verify')).json()) as { ok: boolean; records: number };
  expect(verify.ok).toBe(true);
  const subjects = new Set<string>();
  for (let after = 0; ;) {
    const page = (await (
      await get(`/api/audit/records?afterSeq=${after}&limit=1000&action=memory.written`)
    ).json()) as { records: { seq: number; subject?: string }[] };
    for (const record of page.records) subjects.add(record.subject ?? '');
    if (page.records.length < 1000) break;
    after = page.records.at(-1)?.seq ?? after;
  }
  found = [...acked.facts.keys()].filter((factKey) =>
    subjects.has(JSON.stringify(['crash', factKey])),
  ).length;
  counts.push({ kind: 'audit record (memory.written)', acknowledged: acked.facts.size, found });
  return counts;
}

function report(target: string, counts: Count[]): void {
  const lines = counts.map(
    ({ kind, acknowledged, found }) => `  ${kind.padEnd(30)} acknowledged ${acknowledged}, found ${found}`,
  );
  console.log(`SIGKILL of ${target} under writes, then a restart:\n${lines.join('\n')}`);
}

const ENV = { CAIRN_LOCAL_RUNTIME: '1', CAIRN_AUDIT: 'true', CAIRN_LOG_LEVEL: 'warn' };

describe('npm start (local profile) keeps every acknowledged write through SIGKILL', () => {
  it.each(['the app', 'Azurite'] as const)(
    'SIGKILL of %s mid-stream, restart: every acknowledged write is found, nothing half-written',
    async (target) => {
      const cwd = tempDir('crash');
      const first = await startNpmStart(cwd, ENV);
      const key = readFileSync(path.join(cwd, '.cairn', 'dev-api-key'), 'utf8').trim();
      const azurite = azuritePidOf(first);
      const acked = await writeUntilKilled(cwd, first.url, key, () => {
        if (target === 'the app') first.child.kill('SIGKILL');
        else killPid(azurite);
      });
      // Whatever survived the kill goes too (the app orphans its Azurite; Azurite leaves the app).
      // (A child killed by a signal keeps exitCode null: stopProcess also checks signalCode, so a
      // start that already exited during the writes is not waited for forever.)
      killPid(azurite);
      await stopProcess(first.child, 'SIGKILL');

      const second = await startNpmStart(cwd, ENV);
      const counts = await findAfterRestart(second.url, key, acked);
      report(target, counts);
      for (const count of counts) {
        expect(count.acknowledged, count.kind).toBeGreaterThan(0);
        expect(count.found, count.kind).toBe(count.acknowledged);
      }
    },
    180_000,
  );
});
