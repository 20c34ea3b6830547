import { createPrivateKey, createPublicKey, generateKeyPairSync, type KeyObject } from 'node:crypto';
import { promises as fs } from 'node:fs';

import { publicKeyFromBase64, publicKeyToBase64 } from '@cairn-state/protocol/snapshots/signatures';

/**
 * Ed25519 key files: the private key as PKCS#8 PEM (mode 600), the public key as SPKI PEM. A public
 * key may also be given as the base64 of its 32 raw bytes (what `cairn keygen` prints).
 */

export async function readPrivateKey(file: string): Promise<KeyObject> {
  let key: KeyObject;
  try {
    key = createPrivateKey(await fs.readFile(file));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') {
      throw new Error(`${file} does not exist`, { cause: error });
    }
    throw new Error(`${file} is not a private key (PKCS#8 PEM, as cairn keygen writes)`, { cause: error });
  }
  if (key.asymmetricKeyType !== 'ed25519') throw new Error(`${file} is not an Ed25519 key`);
  return key;
}

export async function readPublicKey(file: string): Promise<KeyObject> {
  const text = await fs.readFile(file, 'utf8').catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') throw new Error(`${file} does not exist`);
    throw error;
  });
  const raw = publicKeyFromBase64(text);
  if (raw !== null) return raw;
  let key: KeyObject;
  try {
    key = createPublicKey(text);
  } catch (error) {
    throw new Error(`${file} is not a public key (SPKI PEM, or the base64 of the 32 raw bytes)`, {
      cause: error,
    });
  }
  if (key.asymmetricKeyType !== 'ed25519') throw new Error(`${file} is not an Ed25519 key`);
  return key;
}

/**
 * Writes `<name>.key` (PKCS#8 PEM, mode 600) and `<name>.pub` (SPKI PEM), never over existing
 * files; returns the base64 of the raw public key.
 */
export async function writeKeyPair(
  name: string,
): Promise<{ privateFile: string; publicFile: string; publicKey: string }> {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  const privateFile = `${name}.key`;
  const publicFile = `${name}.pub`;
  for (const file of [privateFile, publicFile]) {
    if (
      await fs.lstat(file).then(
        () => true,
        () => false,
      )
    )
      throw new Error(`${file} exists; it is left as it is`);
  }
  await fs.writeFile(privateFile, privateKey.export({ type: 'pkcs8', format: 'pem' }), {
    mode: 0o600,
    flag: 'wx',
  });
  await fs.chmod(privateFile, 0o600);
  try {
    await fs.writeFile(publicFile, publicKey.export({ type: 'spki', format: 'pem' }), { flag: 'wx' });
  } catch (error) {
    await fs.rm(privateFile, { force: true });
    throw error;
  }
  return { privateFile, publicFile, publicKey: publicKeyToBase64(publicKey) };
}
