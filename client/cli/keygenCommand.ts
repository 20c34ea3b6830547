/**
 * `cairn keygen <name>`: a new Ed25519 key pair for signing snapshots. Writes `<name>.key` (PKCS#8
 * PEM, mode 600: keep it secret) and `<name>.pub` (SPKI PEM), never over existing files, and prints
 * the base64 of the raw public key: the value for CAIRN_SNAPSHOT_KEYS (`<tenant>:<that>`) or for
 * the admin route of trusted keys. Exit codes: 0 success, 1 failure, 2 usage.
 */
import { writeKeyPair } from '../snapshots/keyFiles';

export const KEYGEN_USAGE = 'usage: cairn keygen <name>   (writes <name>.key and <name>.pub)';

export interface KeygenCommandIo {
  readonly stdout: NodeJS.WritableStream;
  readonly stderr: NodeJS.WritableStream;
}

export async function runKeygenCommand(args: string[], io: KeygenCommandIo): Promise<number> {
  const [name, ...rest] = args;
  if (name === undefined || name === '' || name.startsWith('-') || rest.length > 0) {
    io.stderr.write(`${KEYGEN_USAGE}\n`);
    return 2;
  }
  try {
    const { privateFile, publicFile, publicKey } = await writeKeyPair(name);
    io.stderr.write(
      `wrote ${privateFile} (private, mode 600) and ${publicFile}; trust it with CAIRN_SNAPSHOT_KEYS=<tenant>:${publicKey}\n`,
    );
    io.stdout.write(`${publicKey}\n`);
    return 0;
  } catch (error) {
    io.stderr.write(`cairn keygen: ${error instanceof Error ? error.message : String(error)}\n`);
    return 1;
  }
}
