import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';

import { EXIT_WITH_PARENT } from '../../dev/exitWithParent';
import { stopProcess } from './app';
import { scaled } from './timeouts';

/** `npm start` as the tests run it: the compiled start script, in a folder of the test's choosing. */
const START = path.resolve('dist/dev/start.js');
/** The `start` script itself (it builds what changed, then runs the start script). */
export const LAUNCH = path.resolve('dev/launch.mjs');

export interface Started {
  child: ChildProcess;
  output: () => string;
  url: string;
}

const children: ChildProcess[] = [];

/** Stops every `npm start` begun since the last call (call it after each test, whatever happened). */
export async function stopNpmStarts(): Promise<void> {
  await Promise.all(children.splice(0).map((child) => stopProcess(child, 'SIGINT')));
}

/**
 * Runs `npm start` in `cwd` with exactly `env` (plus PATH/HOME, PORT 0) and resolves once it says
 * where it listens; rejects with its output (and exit code) if it exits first or takes over 90 s (Azurite and the
 * app on a loaded machine).
 */
export function startNpmStart(
  cwd: string,
  env: Record<string, string> = {},
  script = START,
): Promise<Started> {
  const child = spawn(process.execPath, [...EXIT_WITH_PARENT, script], {
    cwd,
    env: { PATH: process.env['PATH'] ?? '', HOME: process.env['HOME'] ?? '', PORT: '0', ...env },
    // stdin: the pipe EXIT_WITH_PARENT watches (npm start stops if this process dies first).
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  children.push(child);
  let output = '';
  child.stdout?.on('data', (data: Buffer) => (output += data.toString()));
  child.stderr?.on('data', (data: Buffer) => (output += data.toString()));
  return new Promise((resolve, reject) => {
    const bound = scaled(90_000);
    const timer = setTimeout(
      () => reject(new Error(`npm start did not answer in ${bound} ms:\n${output}`)),
      bound,
    );
    child.stdout?.on('data', () => {
      const match = /Cairn is listening on (http:\/\/127\.0\.0\.1:\d+)\/api/.exec(output);
      if (match?.[1] !== undefined) {
        clearTimeout(timer);
        resolve({ child, output: () => output, url: match[1] });
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(Object.assign(new Error(`npm start exited (${code}):\n${output}`), { output, code }));
    });
  });
}

/** Runs `npm start` in `cwd` expecting it to refuse: resolves with its exit code and output. */
export async function refusedNpmStart(
  cwd: string,
  env: Record<string, string> = {},
  script = START,
): Promise<{ code: number; output: string }> {
  const outcome = await startNpmStart(cwd, env, script).then(
    (started) => started,
    (error: unknown) => error as { code: number; output: string },
  );
  if ('child' in outcome) throw new Error(`npm start served instead of refusing:\n${outcome.output()}`);
  return { code: outcome.code, output: outcome.output };
}
