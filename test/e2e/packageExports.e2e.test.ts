import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';

import ts from 'typescript';
import { describe, expect, it } from 'vitest';

/**
 * The built package as its users see it: `cairn/client`, `cairn/openai-agents` and `cairn/langgraph`
 * resolve through the package's own `exports` (Node's self-reference), at run time and for the type
 * checker.
 */

interface Exports {
  readonly [subpath: string]: string | { readonly types: string; readonly default: string };
}

const manifest = JSON.parse(readFileSync('package.json', 'utf8')) as { main: string; exports: Exports };

describe('package exports', () => {
  it('keeps the Functions host entry and points every library entry at built code with types', () => {
    expect(manifest.main).toBe('dist/functions/index.js');
    expect(manifest.exports['.']).toBe('./dist/functions/index.js');
    for (const subpath of ['./client', './openai-agents', './langgraph']) {
      const entry = manifest.exports[subpath];
      expect(typeof entry, subpath).toBe('object');
      if (typeof entry !== 'object') continue;
      expect(readFileSync(entry.default).length, entry.default).toBeGreaterThan(0);
      expect(readFileSync(entry.types, 'utf8'), entry.types).toContain('export');
    }
  });

  it('resolves cairn/client, cairn/openai-agents and cairn/langgraph by name in Node and exposes the classes', () => {
    // A separate process, as a user's program: nothing of this test's module system in between.
    const script = `
      const client = require('cairn/client');
      const agents = require('cairn/openai-agents');
      const langgraph = require('cairn/langgraph');
      const { BaseCheckpointSaver } = require('@langchain/langgraph-checkpoint');
      const c = new client.CairnClient({ url: 'http://127.0.0.1:9/api', token: 't' });
      const s = new agents.CairnSession({ client: c, sessionId: 's' });
      const saver = new langgraph.CairnCheckpointSaver({ url: 'http://127.0.0.1:9/api', token: 't', scope: 'app' });
      const store = new langgraph.CairnStore({ client: c, scope: 'app' });
      console.log(JSON.stringify({
        client: require.resolve('cairn/client'),
        agents: require.resolve('cairn/openai-agents'),
        langgraph: require.resolve('cairn/langgraph'),
        saver: [saver instanceof BaseCheckpointSaver, saver.threadName('conv-1'), typeof c.threads.startRun],
        classes: [client.CairnClient, client.CairnHttpError, client.CairnNetworkError, client.CairnTimeoutError,
          client.ArchiveClient, client.KeyValueClient, agents.CairnSession].map((k) => typeof k),
        parts: [typeof c.kv.put, typeof c.sessions.publishCheckpoint, typeof c.coordination.addPromise,
          typeof c.migrations.wait, typeof c.snapshots.save, typeof s.addItems, typeof s.applyHistoryTransaction,
          typeof c.memory.remember, typeof store.batch, typeof store.listNamespaces],
      }));`;
    const result = JSON.parse(execFileSync(process.execPath, ['-e', script], { encoding: 'utf8' })) as {
      client: string;
      agents: string;
      langgraph: string;
      saver: unknown[];
      classes: string[];
      parts: string[];
    };
    expect(result.client).toBe(path.resolve('dist/client/index.js'));
    expect(result.agents).toBe(path.resolve('dist/client/openaiAgents/index.js'));
    expect(result.langgraph).toBe(path.resolve('dist/client/langgraph/index.js'));
    expect(result.saver).toEqual([true, 'app.conv-1', 'function']);
    expect(result.classes).toEqual(Array(7).fill('function'));
    expect(result.parts).toEqual(Array(10).fill('function'));
  });

  it('type-checks a user program against the declarations; CairnSession is an SDK Session, CairnCheckpointSaver a LangGraph checkpointer', () => {
    // Inside the package (dist/ is build output), so that the name resolves to the package itself.
    const folder = path.resolve('dist', `.exports-check-${randomBytes(6).toString('hex')}`);
    mkdirSync(folder, { recursive: true });
    try {
      const file = path.join(folder, 'user.ts');
      writeFileSync(
        file,
        `import type { Session } from '@openai/agents';
import { CairnClient, CairnHttpError, type WriteResult } from 'cairn/client';
import { CairnSession } from 'cairn/openai-agents';
import { CairnCheckpointSaver, CairnStore } from 'cairn/langgraph';
import type { BaseCheckpointSaver, BaseStore } from '@langchain/langgraph-checkpoint';
import { MessagesAnnotation, StateGraph } from '@langchain/langgraph';

const client = new CairnClient({ url: 'http://127.0.0.1:7071/api', token: 'key' });
export const session: Session = new CairnSession({ client, sessionId: 'chat-1' });
export const store: BaseStore = new CairnStore({ client, scope: 'support-bot' });
export const etagOf = (result: WriteResult): string => result.etag;
export const isGone = (error: unknown): boolean => error instanceof CairnHttpError && error.code === 'not_found';
// @ts-expect-error: put takes a key and a value
export const wrong = client.kv.put(42);
export const checkpointer: BaseCheckpointSaver = new CairnCheckpointSaver({ url: 'http://127.0.0.1:7071/api', token: 'key', scope: 'app' });
export const graph = new StateGraph(MessagesAnnotation)
  .addNode('assistant', () => ({ messages: [] }))
  .addEdge('__start__', 'assistant')
  .compile({ checkpointer: new CairnCheckpointSaver({ client, runId: 'run-1' }) });
export const runStarted = client.threads.startRun(new CairnCheckpointSaver({ client }).threadName('conv-1'), { onBusy: 'reject' });
// @ts-expect-error: a saver needs a service (url and token, or a client)
export const missing = new CairnCheckpointSaver({ scope: 'app' });
`,
      );
      const program = ts.createProgram([file], {
        module: ts.ModuleKind.Node16,
        moduleResolution: ts.ModuleResolutionKind.Node16,
        target: ts.ScriptTarget.ES2022,
        strict: true,
        noEmit: true,
        skipLibCheck: true,
        types: ['node'],
      });
      const problems = ts
        .getPreEmitDiagnostics(program)
        .map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'));
      expect(problems).toEqual([]);
      const resolved = program.getSourceFiles().map((source) => path.relative('.', source.fileName));
      expect(resolved).toContain(path.join('dist', 'client', 'index.d.ts'));
      expect(resolved).toContain(path.join('dist', 'client', 'openaiAgents', 'index.d.ts'));
      expect(resolved).toContain(path.join('dist', 'client', 'langgraph', 'index.d.ts'));
    } finally {
      rmSync(folder, { recursive: true, force: true });
    }
  });
});
