import { spawn } from 'node:child_process';
import path from 'node:path';

import { stopProcess } from './app';
import { onCleanUp } from './cleanup';

/** The compiled `cairn` command. */
export const CLI = path.resolve('client/cli/dist/cjs/bin.js');

export interface CliRun {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * Runs `cairn <args>` as its own process with exactly `env` (plus PATH) and collects its output.
 * A run that outlives its test (a hung command) is stopped at clean-up.
 */
export function runCairn(args: string[], env: Record<string, string>, cwd?: string): Promise<CliRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], {
      env: { PATH: process.env['PATH'] ?? '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
      ...(cwd === undefined ? {} : { cwd }),
    });
    const forget = onCleanUp(() => stopProcess(child));
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (data: Buffer) => (stdout += data.toString()));
    child.stderr.on('data', (data: Buffer) => (stderr += data.toString()));
    child.once('error', (error) => {
      forget();
      reject(error);
    });
    child.once('exit', (code) => {
      forget();
      resolve({ code: code ?? -1, stdout, stderr });
    });
  });
}
