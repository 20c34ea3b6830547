import { spawn } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

import { CairnClient } from '@cairn-state/client';
import { CairnStore } from '@cairn-state/langgraph';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { apiKeysSetting, newTenant, type RunningApp, startApp, stopProcess } from '../support/app';
import { azurite } from '../support/azurite';
import { onCleanUp, tempDir } from '../support/cleanup';
import { CLI } from '../support/cli';
import { memoryTableSettings, sessionIndexSettings } from '../support/tables';

/**
 * The README's tour, run as written: its bash blocks go through bash (in a folder holding
 * `.cairn/dev-api-key`, as `npm start` leaves it, with the tour's address replaced by a test
 * app's), and each answer is checked against the comment the README shows for it: a status code
 * (of a `curl -si` line), a JSON sample (`…` standing for any value, `{…,` and `,…}` for other
 * fields) and `; again:` for the answer to the same line run once more. Lines without such a
 * comment must succeed and answer no error.
 */

const README = readFileSync('README.md', 'utf8');
const TOUR_ADDRESS = 'http://127.0.0.1:7071';

/** The bash blocks between the tour's heading and the next section. */
function tourBlocks(): string[] {
  const start = README.indexOf('## A five-minute tour');
  const end = README.indexOf('\n## ', start + 1);
  const tour = README.slice(start, end);
  // Not the client package's install line: here the workspace is that package (the pack-and-install
  // test installs it as a user does).
  return [...tour.matchAll(/```bash\n([\s\S]*?)```/g)]
    .map((match) => match[1] ?? '')
    .filter((block) => !block.startsWith('npm install '));
}

interface Expectation {
  readonly status?: number;
  readonly json?: unknown;
}

interface Step {
  readonly command: string;
  /** One expectation per run of the command (a second after `; again:`); none: it just succeeds. */
  readonly expected: Expectation[];
}

const ANY = '\u0000any';

/** Runs code from a page as the body of an async function of the named parameters. */
const AsyncFunction = (Object.getPrototypeOf(async () => undefined) as { constructor: unknown })
  .constructor as new (...params: string[]) => (...args: unknown[]) => Promise<unknown>;

/** A README sample as JSON: `…` is any value, `{…,` and `,…}` leave other fields unchecked. */
function sample(text: string): unknown {
  const json = text
    .replaceAll('{…,', '{')
    .replaceAll(',…}', '}')
    .replaceAll('"…"', JSON.stringify(ANY))
    .replaceAll('…', JSON.stringify(ANY));
  return JSON.parse(json);
}

function expectation(text: string): Expectation | undefined {
  const match = /^(\d{3})?\s*(\{.*\})?/.exec(text.trim());
  if (match?.[1] === undefined && match?.[2] === undefined) return undefined;
  return {
    ...(match[1] === undefined ? {} : { status: Number(match[1]) }),
    ...(match[2] === undefined ? {} : { json: sample(match[2]) }),
  };
}

function steps(block: string): Step[] {
  const result: { command: string; expected: Expectation[] }[] = [];
  for (const line of block.split('\n')) {
    if (line.trim() === '') continue;
    const comment = /^#\s(.*)$/.exec(line);
    if (comment !== null) {
      // A comment line right under a command without one shows that command's answer.
      const previous = result.at(-1);
      const shown = (comment[1] ?? '').split('; again: ').map(expectation);
      if (previous !== undefined && previous.expected.length === 0 && shown[0] !== undefined) {
        previous.expected.push(...shown.filter((e) => e !== undefined));
      }
      continue;
    }
    const trailing = /^(.*?)\s+#\s(.*)$/.exec(line);
    const command = trailing?.[1] ?? line;
    const shown = trailing === null ? [] : (trailing[2] ?? '').split('; again: ').map(expectation);
    result.push({ command, expected: shown.filter((e) => e !== undefined) });
  }
  return result;
}

/** `actual` has every field of `expected` (arrays of the same length), `ANY` matching anything. */
function matches(actual: unknown, expected: unknown): boolean {
  if (expected === ANY) return actual !== undefined;
  if (Array.isArray(expected)) {
    return (
      Array.isArray(actual) &&
      actual.length === expected.length &&
      expected.every((item, i) => matches(actual[i], item))
    );
  }
  if (expected !== null && typeof expected === 'object') {
    if (actual === null || typeof actual !== 'object') return false;
    return Object.entries(expected).every(([key, value]) =>
      matches((actual as Record<string, unknown>)[key], value),
    );
  }
  return actual === expected;
}

interface Answer {
  readonly status?: number;
  readonly body: string;
  readonly code: number;
}

/** `curl -si` output: the status line's code and the body after the headers. */
function answer(output: string, code: number): Answer {
  const head = /^HTTP\/[\d.]+ (\d{3})/.exec(output);
  if (head === null) return { body: output, code };
  const split = output.indexOf('\r\n\r\n');
  return { status: Number(head[1]), body: split < 0 ? '' : output.slice(split + 4), code };
}

/** Runs every command (twice when the README shows a second answer) in one bash, in order. */
function runInBash(all: Step[], cwd: string, env: Record<string, string>): Promise<Answer[][]> {
  const script = [
    'set -u',
    `npx() { if [ "$1" = cairn ]; then shift; node ${JSON.stringify(CLI)} "$@"; else return 127; fi; }`,
    ...all.flatMap((step, i) =>
      Array.from({ length: Math.max(1, step.expected.length) }, (_, run) => [
        `printf '\\n@@start ${i} ${run}\\n'`,
        step.command,
        `printf '\\n@@end %s\\n' "$?"`,
      ]).flat(),
    ),
  ].join('\n');
  return new Promise((resolve, reject) => {
    const child = spawn('bash', ['-c', script], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    const forget = onCleanUp(() => stopProcess(child));
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (data: Buffer) => (stdout += data.toString()));
    child.stderr.on('data', (data: Buffer) => (stderr += data.toString()));
    child.once('error', reject);
    child.once('exit', () => {
      forget();
      const answers: Answer[][] = all.map(() => []);
      for (const match of stdout.matchAll(/\n@@start (\d+) (\d+)\n([\s\S]*?)\n@@end (\d+)\n/g)) {
        answers[Number(match[1])]?.push(answer(match[3] ?? '', Number(match[4])));
      }
      if (answers.some((runs, i) => runs.length !== Math.max(1, all[i]!.expected.length))) {
        reject(new Error(`the tour did not run to its end:\n${stdout}\n${stderr}`));
      } else {
        resolve(answers);
      }
    });
  });
}

describe('the README tour', () => {
  let app: RunningApp;
  let home: string;
  let tmp: string;
  const dev = newTenant('dev', true);

  beforeAll(async () => {
    home = tempDir('readme-tour-');
    tmp = tempDir('readme-tour-tmp-');
    // What `npm start` leaves in the project folder: the development key.
    mkdirSync(path.join(home, '.cairn'));
    writeFileSync(path.join(home, '.cairn', 'dev-api-key'), dev.key, { mode: 0o600 });
    const { tableEndpoint } = azurite();
    app = await startApp({
      CAIRN_API_KEYS: apiKeysSetting([dev]),
      CAIRN_DATA_DIR: path.join(home, '.cairn', 'data'),
      ...sessionIndexSettings(tableEndpoint),
      ...memoryTableSettings(tableEndpoint),
    });
  });

  afterAll(async () => {
    await app.stop();
  });

  it('shows the tour as bash blocks, with the address npm start serves', () => {
    const blocks = tourBlocks();
    expect(blocks.length).toBe(2);
    expect(blocks[0]).toContain(`CAIRN_URL=${TOUR_ADDRESS} `);
    // The key is exported before anything (the client snippets too) reads it.
    expect(README.indexOf('CAIRN_KEY=$(cat .cairn/dev-api-key)')).toBeLessThan(
      README.indexOf('process.env.CAIRN_KEY'),
    );
  });

  it('gets the answers its comments show, and restores the session it published', async () => {
    const all = tourBlocks().flatMap(steps);
    const commands = all.map((step) => ({
      ...step,
      command: step.command.replaceAll(TOUR_ADDRESS, app.url),
    }));
    const answers = await runInBash(commands, home, {
      PATH: process.env['PATH'] ?? '',
      HOME: home,
      TMPDIR: tmp,
    });
    expect(all.filter((step) => step.expected.length > 0).length).toBeGreaterThanOrEqual(8);
    all.forEach((step, i) => {
      const runs = answers[i]!;
      runs.forEach((run, r) => {
        const where = `${step.command}\n(run ${r + 1}) answered ${run.status ?? ''} ${run.body}`;
        expect(run.code, where).toBe(0);
        const expected = step.expected[r];
        if (expected?.status !== undefined) expect(run.status, where).toBe(expected.status);
        if (expected?.json !== undefined) {
          expect(matches(JSON.parse(run.body), expected.json), where).toBe(true);
        }
        // An answer the README does not show as an error (4xx) is none.
        if ((expected?.status ?? 200) < 400 && run.body.trim().startsWith('{')) {
          expect(JSON.parse(run.body), where).not.toHaveProperty('error');
        }
        if (run.status !== undefined && expected?.status === undefined) {
          expect(run.status, where).toBeLessThan(400);
        }
      });
    });
    // The session block: the restored folder holds what was published, byte for byte.
    const [made] = readdirSync(tmp);
    const folder = path.join(tmp, made!);
    expect(readFileSync(path.join(folder, 'restored', 'events.jsonl'), 'utf8')).toBe(
      readFileSync(path.join(folder, 'session', 'events.jsonl'), 'utf8'),
    );
  });

  it("runs docs/memory.md's store example and finds the fact it puts", async () => {
    const page = readFileSync('docs/memory.md', 'utf8');
    const lines = page.split('\n').filter((line) => /^await store\.(put|search)\(/.test(line));
    expect(lines.map((line) => /^await store\.(\w+)/.exec(line)?.[1])).toEqual(['put', 'search']);
    const store = new CairnStore({ url: `${app.url}/api`, token: dev.key, scope: 'support-bot' });
    // The two lines as the page has them (plain JavaScript), the search's answer returned.
    const example = new AsyncFunction(
      'store',
      `${lines[0]}\nreturn ${lines[1]!.replace(/;\s*(\/\/.*)?$/, '')};`,
    );
    const found = (await example(store)) as { key: string; value: unknown }[];
    expect(found.map((item) => [item.key, item.value])).toEqual([['prefs', { theme: 'dark' }]]);
  });

  it("runs the tour's client snippet with the CAIRN_URL and CAIRN_KEY the tour exports", async () => {
    const start = README.indexOf('## A five-minute tour');
    const block = /```ts\n([\s\S]*?)```/.exec(README.slice(start));
    const snippet = block?.[1] ?? '';
    // The README shows the client package's own snippet (the one the pack-and-install test runs in
    // installed projects) after its install line.
    const packagePage = readFileSync('client/client/README.md', 'utf8');
    expect(/<!-- snippet: client -->\n+```ts\n([\s\S]*?)```/.exec(packagePage)?.[1]).toBe(snippet);
    expect(README.slice(start)).toContain('```bash\nnpm install @cairn-state/client\n```');
    const imported = "import { CairnClient } from '@cairn-state/client';";
    expect(snippet).toContain(imported);
    // The snippet's body as JavaScript, its import given as a parameter, its top-level awaits in a function.
    const body = snippet.replace(imported, '');
    const js = ts.transpileModule(`(async () => {\n${body}\n})()`, {
      compilerOptions: { target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.None },
    }).outputText;
    const printed: unknown[] = [];
    const run = new AsyncFunction('CairnClient', 'process', 'console', `return ${js}`);
    const env = { CAIRN_URL: app.url, CAIRN_KEY: dev.key };
    await run(CairnClient, { env }, { log: (line: unknown) => printed.push(line) });
    expect(printed).toEqual(['notes/today']);
  });
});
