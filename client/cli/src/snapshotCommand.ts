import { parseArgs } from 'node:util';

import { readPrivateKey, readPublicKey } from '@cairn-state/client';
import { validateSnapshotId, validateWorkspaceId } from '@cairn-state/protocol/snapshots/identifiers';

import {
  checked,
  type Command,
  emptyOrAbsentFolder,
  existingFolder,
  EXIT_FAILURE,
  EXIT_SUCCESS,
  localFile,
  UsageError,
} from './command.js';
import { mb, progressLine } from './progress.js';

/**
 * `cairn snapshot save|load|verify|list|delete`: signed workspace snapshots from the command line
 * (docs/snapshots.md). `save` prints the snapshot id on stdout; the others print one JSON report.
 * Progress (on a terminal only) and messages go to stderr. A verify that finds the snapshot damaged
 * prints its report and exits 1.
 */
export const snapshotCommand: Command = {
  usage: `  cairn snapshot save <dir> --workspace <id> --key <private key file> [--concurrency <n>] [--allow-external-symlinks] [--skip-unsupported]
  cairn snapshot load <snapshot id> <dir> --public-key <file> [--workspace <id>] [--concurrency <n>] [--allow-external-symlinks]
  cairn snapshot verify <snapshot id> --public-key <file> [--workspace <id>] [--read-data] [--concurrency <n>] [--allow-external-symlinks]
  cairn snapshot list --workspace <id>
  cairn snapshot delete <snapshot id> --workspace <id>`,

  async run(args, io) {
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
    const [action, ...operands] = positionals;
    const expect = (count: number, shape: string) => {
      if (operands.length !== count) throw new UsageError(`expected "${shape}"`);
    };
    const need = (value: string | undefined, option: string): string => {
      if (value === undefined) throw new UsageError(`${option} is required`);
      return value;
    };
    const concurrency = values.concurrency === undefined ? undefined : Number(values.concurrency);
    if (
      concurrency !== undefined &&
      (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 64)
    ) {
      throw new UsageError('--concurrency must be a whole number from 1 to 64');
    }
    if (values.workspace !== undefined) checked('--workspace', values.workspace, validateWorkspaceId);
    const snapshotId = (operand: string | undefined) =>
      checked('<snapshot id>', operand ?? '', validateSnapshotId);
    const allowExternalSymlinks = values['allow-external-symlinks'] === true;
    const inFlight = concurrency === undefined ? {} : { concurrency };
    const workspace = values.workspace === undefined ? {} : { workspaceId: values.workspace };
    const json = (value: unknown) => io.stdout.write(`${JSON.stringify(value)}\n`);
    const progress = progressLine(io.stderr);

    try {
      switch (action) {
        case 'save': {
          expect(1, 'save <dir>');
          const workspaceId = need(values.workspace, '--workspace <id>');
          const keyFile = need(values.key, '--key <private key file>');
          const privateKey = await localFile('--key', keyFile, readPrivateKey);
          await existingFolder('<dir>', operands[0] ?? '');
          const snapshots = io.connect().snapshots;
          const report = await snapshots.save(operands[0] ?? '', {
            workspaceId,
            privateKey,
            allowExternalSymlinks,
            skipUnsupported: values['skip-unsupported'] === true,
            ...inFlight,
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
          return EXIT_SUCCESS;
        }
        case 'load': {
          expect(2, 'load <snapshot id> <dir>');
          const id = snapshotId(operands[0]);
          const publicKeyFile = need(values['public-key'], '--public-key <file>');
          const publicKey = await localFile('--public-key', publicKeyFile, readPublicKey);
          await emptyOrAbsentFolder('<dir>', operands[1] ?? '');
          const snapshots = io.connect().snapshots;
          const report = await snapshots.load(id, operands[1] ?? '', {
            publicKey,
            allowExternalSymlinks,
            ...workspace,
            ...inFlight,
            onProgress: (p) => progress(`loading: ${p.filesDone}/${p.files} files, ${mb(p.bytes)}`),
          });
          progress.end();
          json(report);
          return EXIT_SUCCESS;
        }
        case 'verify': {
          expect(1, 'verify <snapshot id>');
          const id = snapshotId(operands[0]);
          const publicKeyFile = need(values['public-key'], '--public-key <file>');
          const publicKey = await localFile('--public-key', publicKeyFile, readPublicKey);
          const snapshots = io.connect().snapshots;
          const report = await snapshots.verify(id, {
            publicKey,
            allowExternalSymlinks,
            readData: values['read-data'] === true,
            ...workspace,
            ...inFlight,
          });
          json(report);
          if (report.problems.length === 0) return EXIT_SUCCESS;
          io.stderr.write(
            `cairn snapshot: snapshot ${report.id} is damaged:\n  ${report.problems.join('\n  ')}\n`,
          );
          return EXIT_FAILURE;
        }
        case 'list': {
          expect(0, 'list');
          const workspaceId = need(values.workspace, '--workspace <id>');
          json(await io.connect().snapshots.list(workspaceId));
          return EXIT_SUCCESS;
        }
        case 'delete': {
          expect(1, 'delete <snapshot id>');
          const id = snapshotId(operands[0]);
          const workspaceId = need(values.workspace, '--workspace <id>');
          json(await io.connect().snapshots.delete(workspaceId, id));
          return EXIT_SUCCESS;
        }
        default:
          throw new UsageError('expected one of save, load, verify, list, delete');
      }
    } finally {
      // A failure's message must not land on a progress line it interrupted.
      progress.end();
    }
  },
};
