/**
 * `cairn snapshot`: signed workspace snapshots from the command line (docs/snapshots.md).
 *
 *     cairn snapshot save <dir> --workspace <id> --key <private key file>
 *     cairn snapshot load <snapshot id> <dir> --public-key <file> [--workspace <id>]
 *     cairn snapshot verify <snapshot id> --public-key <file> [--workspace <id>] [--read-data]
 *     cairn snapshot list --workspace <id>
 *     cairn snapshot delete <snapshot id> --workspace <id>
 *
 * CAIRN_URL is Cairn's base URL, CAIRN_KEY an API key or access token. `save` prints the snapshot id
 * on stdout; the others print one JSON report. Progress (on a terminal) and errors go to stderr.
 * Exit codes: 0 success, 1 failure (including a verify that found problems), 2 usage.
 */
import { parseArgs } from 'node:util';

import { readPrivateKey, readPublicKey } from '../snapshots/keyFiles';
import { loadSnapshot } from '../snapshots/load';
import { saveSnapshot } from '../snapshots/save';
import { SnapshotApi } from '../snapshots/snapshotApi';
import { verifySnapshot } from '../snapshots/verify';
import type { TransportOptions } from '../transport';

export const SNAPSHOT_USAGE = `usage:
  cairn snapshot save <dir> --workspace <id> --key <private key file> [--concurrency <n>]
                      [--allow-external-symlinks] [--skip-unsupported]
  cairn snapshot load <snapshot id> <dir> --public-key <file> [--workspace <id>] [--concurrency <n>]
                      [--allow-external-symlinks]
  cairn snapshot verify <snapshot id> --public-key <file> [--workspace <id>] [--read-data]
                      [--allow-external-symlinks]
  cairn snapshot list --workspace <id>
  cairn snapshot delete <snapshot id> --workspace <id>
environment: CAIRN_URL (e.g. http://127.0.0.1:7071), CAIRN_KEY (API key or access token)`;

export interface SnapshotCommandIo {
  readonly env: NodeJS.ProcessEnv;
  readonly stdout: NodeJS.WritableStream;
  readonly stderr: NodeJS.WritableStream & { isTTY?: boolean };
  /** Tests swap the sender to count or break requests. */
  readonly transport?: Partial<TransportOptions>;
}

class UsageError extends Error {}

/** Runs `snapshot <subcommand> ...` (the arguments after `snapshot`); returns the exit code. */
export async function runSnapshotCommand(args: string[], io: SnapshotCommandIo): Promise<number> {
  try {
    return await snapshotCommand(args, io);
  } catch (error) {
    const usage =
      error instanceof UsageError || String((error as { code?: unknown }).code).startsWith('ERR_PARSE_ARGS');
    // On a terminal, first clear a progress line the failure interrupted.
    if (io.stderr.isTTY === true) io.stderr.write('\r\u001b[K');
    io.stderr.write(`cairn snapshot: ${error instanceof Error ? error.message : String(error)}\n`);
    if (usage) io.stderr.write(`${SNAPSHOT_USAGE}\n`);
    return usage ? 2 : 1;
  }
}

async function snapshotCommand(args: string[], io: SnapshotCommandIo): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    strict: true,
    options: {
      workspace: { type: 'string' },
      key: { type: 'string' },
      'public-key': { type: 'string' },
      concurrency: { type: 'string' },
      'allow-external-symlinks': { type: 'boolean' },
      'skip-unsupported': { type: 'boolean' },
      'read-data': { type: 'boolean' },
    },
  });
  const [command, ...operands] = positionals;
  const expect = (count: number, shape: string) => {
    if (operands.length !== count) throw new UsageError(`expected "${command ?? ''} ${shape}"`);
  };
  const need = (value: string | undefined, option: string): string => {
    if (value === undefined) throw new UsageError(`${option} is required`);
    return value;
  };
  const concurrency = values.concurrency === undefined ? undefined : Number(values.concurrency);
  if (concurrency !== undefined && (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 64)) {
    throw new UsageError('--concurrency must be a whole number from 1 to 64');
  }
  const allowExternalSymlinks = values['allow-external-symlinks'] === true;
  const progress = progressLine(io.stderr);
  const json = (value: unknown) => io.stdout.write(`${JSON.stringify(value)}\n`);

  switch (command) {
    case 'save': {
      expect(1, 'save <dir>');
      const workspaceId = need(values.workspace, '--workspace <id>');
      const keyFile = need(values.key, '--key <private key file>');
      const api = apiFrom(io);
      const report = await saveSnapshot(api, operands[0] ?? '', {
        workspaceId,
        privateKey: await readPrivateKey(keyFile),
        allowExternalSymlinks,
        skipUnsupported: values['skip-unsupported'] === true,
        ...(concurrency === undefined ? {} : { concurrency }),
        onProgress: (p) =>
          progress(
            `saving: ${p.filesDone}/${p.files} files, ${mb(p.bytesRead)} read, ${p.partsUploaded} parts uploaded`,
          ),
      });
      progress.end();
      for (const entry of report.skipped) io.stderr.write(`skipped ${entry}\n`);
      io.stderr.write(
        `saved ${report.files} files and ${report.symlinks} symlinks (${mb(report.bytes)}) of workspace ${workspaceId}: ` +
          `${report.partsUploaded} parts uploaded (${mb(report.bytesUploaded)}), ${report.partsAlreadyStored} already stored, ${report.requests} requests\n`,
      );
      io.stdout.write(`${report.id}\n`);
      return 0;
    }
    case 'load': {
      expect(2, 'load <snapshot id> <dir>');
      const publicKey = await readPublicKey(need(values['public-key'], '--public-key <file>'));
      const report = await loadSnapshot(apiFrom(io), operands[0] ?? '', operands[1] ?? '', {
        publicKey,
        allowExternalSymlinks,
        ...(values.workspace === undefined ? {} : { workspaceId: values.workspace }),
        ...(concurrency === undefined ? {} : { concurrency }),
        onProgress: (p) => progress(`loading: ${p.filesDone}/${p.files} files, ${mb(p.bytes)}`),
      });
      progress.end();
      json(report);
      return 0;
    }
    case 'verify': {
      expect(1, 'verify <snapshot id>');
      const publicKey = await readPublicKey(need(values['public-key'], '--public-key <file>'));
      const report = await verifySnapshot(apiFrom(io), operands[0] ?? '', {
        publicKey,
        allowExternalSymlinks,
        readData: values['read-data'] === true,
        ...(values.workspace === undefined ? {} : { workspaceId: values.workspace }),
        ...(concurrency === undefined ? {} : { concurrency }),
      });
      json(report);
      if (report.problems.length === 0) return 0;
      io.stderr.write(
        `cairn snapshot: snapshot ${report.id} is damaged:\n  ${report.problems.join('\n  ')}\n`,
      );
      return 1;
    }
    case 'list': {
      expect(0, 'list');
      json(await apiFrom(io).list(need(values.workspace, '--workspace <id>')));
      return 0;
    }
    case 'delete': {
      expect(1, 'delete <snapshot id>');
      json(await apiFrom(io).delete(need(values.workspace, '--workspace <id>'), operands[0] ?? ''));
      return 0;
    }
    default:
      throw new UsageError('expected one of save, load, verify, list, delete');
  }
}

function apiFrom(io: SnapshotCommandIo): SnapshotApi {
  const baseUrl = io.env['CAIRN_URL'];
  const token = io.env['CAIRN_KEY'];
  if (!baseUrl) throw new UsageError('set CAIRN_URL to the service URL');
  if (!token) throw new UsageError('set CAIRN_KEY to an API key or access token');
  return new SnapshotApi({ baseUrl, token, ...io.transport });
}

function mb(bytes: number): string {
  return `${(bytes / (1024 * 1024)).toFixed(1)} MiB`;
}

/** One self-overwriting line on a terminal, at most five times a second; nothing elsewhere. */
function progressLine(stream: NodeJS.WritableStream & { isTTY?: boolean }) {
  let last = 0;
  let shown = false;
  const show = (line: string) => {
    if (stream.isTTY !== true) return;
    const now = Date.now();
    if (now - last < 200) return;
    last = now;
    shown = true;
    stream.write(`\r\u001b[K${line}`);
  };
  show.end = () => {
    if (shown) stream.write('\r\u001b[K');
  };
  return show;
}
