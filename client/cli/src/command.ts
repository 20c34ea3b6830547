import { promises as fs } from 'node:fs';

import type { CairnClient, CairnClientOptions } from '@cairn-state/client';
import { InvalidArgumentError } from '@cairn-state/protocol/errors';

/**
 * What every `cairn` command shares: its input and output, the one way it reaches the service, and
 * the one exit-code rule (0 success; 1 failure or problems found; 2 usage error).
 */

export const EXIT_SUCCESS = 0;
/** The command failed, or it ran and found problems (a report with errors). */
export const EXIT_FAILURE = 1;
/**
 * A usage error, caught before any request: an unknown command, a bad or missing argument or
 * setting, or a local file or folder named on the command line that cannot be used as given (a key
 * file missing or not a key, a folder to read missing, a file to create that exists, a folder to
 * fill that is not empty). Nothing was attempted.
 */
export const EXIT_USAGE = 2;

/** A bad or missing argument or setting: the command prints its usage and exits 2. */
export class UsageError extends Error {}

export interface CommandIo {
  readonly stdout: NodeJS.WritableStream & { isTTY?: boolean };
  readonly stderr: NodeJS.WritableStream & { isTTY?: boolean; columns?: number };
  /** A client of the service named by CAIRN_URL with the credential CAIRN_KEY; UsageError without them. */
  connect(options?: Partial<Omit<CairnClientOptions, 'url' | 'token'>>): CairnClient;
}

export interface Command {
  /** One line per form of the command, each starting with `cairn <name>`. */
  readonly usage: string;
  /** Runs the arguments after the command's name; resolves with EXIT_SUCCESS or EXIT_FAILURE. */
  run(args: string[], io: CommandIo): Promise<number>;
}

/** Whether `error` is a usage error: ours, or node's parseArgs refusing an option. */
export function isUsageError(error: unknown): boolean {
  return (
    error instanceof UsageError ||
    String((error as { code?: unknown } | null)?.code).startsWith('ERR_PARSE_ARGS')
  );
}

/**
 * `value` of `option` checked by one of the shared validators (the service's own rule): its refusal
 * is a usage error naming the option, before anything is sent.
 */
export function checked(
  option: string,
  value: string,
  validate: (value: string, field: string) => void,
): string {
  try {
    validate(value, option);
  } catch (error) {
    if (error instanceof InvalidArgumentError) throw new UsageError(error.message);
    throw error;
  }
  return value;
}

/** What `read` makes of a local file named by `option`; any failure is a usage error naming both. */
export async function localFile<T>(
  option: string,
  file: string,
  read: (file: string) => Promise<T>,
): Promise<T> {
  try {
    return await read(file);
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    throw new UsageError(`${option}: ${message.includes(file) ? message : `${file}: ${message}`}`);
  }
}

/** Refuses (usage error) a folder to read from that does not exist or is not a folder. */
export async function existingFolder(option: string, dir: string): Promise<void> {
  const stat = await fs.stat(dir).catch(() => null);
  if (stat === null) throw new UsageError(`${option}: ${dir} does not exist`);
  if (!stat.isDirectory()) throw new UsageError(`${option}: ${dir} is not a folder`);
}

/** Refuses (usage error) a folder to fill that exists and is not an empty folder. */
export async function emptyOrAbsentFolder(option: string, dir: string): Promise<void> {
  const stat = await fs.lstat(dir).catch(() => null);
  if (stat === null) return;
  if (!stat.isDirectory() || (await fs.readdir(dir)).length > 0) {
    throw new UsageError(`${option}: ${dir} exists and is not an empty folder`);
  }
}

/** Refuses (usage error) a file to create that exists: nothing is written over. */
export async function absentFile(option: string, file: string): Promise<void> {
  const exists = await fs.lstat(file).then(
    () => true,
    () => false,
  );
  if (exists) throw new UsageError(`${option}: ${file} exists; it is left as it is`);
}

/** Whether the arguments ask for help (`--help` or `-h` before any `--`). */
export function asksForHelp(args: readonly string[]): boolean {
  const end = args.indexOf('--');
  return (end === -1 ? args : args.slice(0, end)).some((arg) => arg === '--help' || arg === '-h');
}
