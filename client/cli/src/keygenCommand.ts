import { writeKeyPair } from '@cairn-state/client';

import { absentFile, type Command, EXIT_SUCCESS, UsageError } from './command.js';

/**
 * `cairn keygen <name>`: a new Ed25519 key pair for signing snapshots. Writes `<name>.key` (PKCS#8
 * PEM, mode 600: keep it secret) and `<name>.pub` (SPKI PEM), never over existing files, and prints
 * the base64 of the raw public key: the value for CAIRN_SNAPSHOT_KEYS (`<tenant>:<that>`) or for
 * the admin route of trusted keys. Calls no service.
 */
export const keygenCommand: Command = {
  usage: '  cairn keygen <name>',

  async run(args, io) {
    const [name, ...rest] = args;
    if (name === undefined || name === '' || name.startsWith('-') || rest.length > 0) {
      throw new UsageError('expected "keygen <name>" (writes <name>.key and <name>.pub)');
    }
    // Files that exist are a usage error (exit 2), like every unusable local file: checked first.
    for (const file of [`${name}.key`, `${name}.pub`]) await absentFile('<name>', file);
    const { privateFile, publicFile, publicKey } = await writeKeyPair(name);
    io.stderr.write(
      `wrote ${privateFile} (private, mode 600) and ${publicFile}; trust it with CAIRN_SNAPSHOT_KEYS=<tenant>:${publicKey}\n`,
    );
    io.stdout.write(`${publicKey}\n`);
    return EXIT_SUCCESS;
  },
};
