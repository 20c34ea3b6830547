import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

import { ChainVerifier, type ExpectedHead } from '../../shared/audit/chain';
import { parsePublicKey, publicKeyId, verifyHeadSignature } from '../../shared/audit/headSignature';
import { type Command, EXIT_FAILURE, EXIT_SUCCESS, UsageError } from './command';

/**
 * `cairn audit verify --public-key <file>`: reads the caller's tenant's whole audit trail and its
 * signed heads from the service and checks them here, trusting nothing the service computed: every
 * record's seq, link and hash, every head signed by the public key (its signature, and that the
 * trail still holds that seq with that hash: a cut tail or a rewritten chain fails), and that at
 * least one head is signed by that key. Prints a JSON report; exit 0 clean, 1 problems, 2 usage.
 *
 * `cairn audit keygen --public-key <file>`: makes an Ed25519 key pair, writes the public key (PEM)
 * to the file (never over an existing one) and prints the private key for CAIRN_AUDIT_SIGNING_KEY
 * (base64 of its PKCS#8 DER) on stdout.
 */
export const auditCommand: Command = {
  usage: `  cairn audit verify --public-key <file> [--expected-seq <n> --expected-hash <hex>]
  cairn audit keygen --public-key <file>`,

  async run(args, io) {
    const [action, ...rest] = args;
    if (action === 'keygen') return keygen(rest, io);
    if (action !== 'verify') throw new UsageError('the audit actions are verify and keygen');
    const { values } = parseArgs({
      args: rest,
      options: {
        'public-key': { type: 'string' },
        'expected-seq': { type: 'string' },
        'expected-hash': { type: 'string' },
      },
      strict: true,
    });
    const publicKey = readPublicKey(values['public-key']);
    const expected = expectedHead(values['expected-seq'], values['expected-hash']);
    const audit = io.connect().audit;

    const keyId = publicKeyId(publicKey);
    const heads: ExpectedHead[] = [];
    const problems: string[] = [];
    let otherKeys = 0;
    for await (const head of audit.allHeads()) {
      if (head.keyId !== keyId) {
        otherKeys++;
        continue;
      }
      if (!verifyHeadSignature(publicKey, head)) {
        problems.push(`the signature of the head at seq ${head.seq} does not verify`);
        continue;
      }
      heads.push({ seq: head.seq, hash: head.hash });
    }
    if (expected !== undefined) heads.push(expected);
    const verifier = new ChainVerifier(heads);
    for await (const record of audit.allRecords()) verifier.add(record);
    const result = verifier.result();
    if (result.firstBroken !== null) problems.push(`the trail is broken at seq ${result.firstBroken}`);
    const signed = heads.length - (expected === undefined ? 0 : 1);
    if (signed === 0) problems.push('no head of the trail is signed by this key');
    const report = {
      ok: problems.length === 0,
      records: result.records,
      head: result.head,
      firstBroken: result.firstBroken,
      signedHeadsChecked: signed,
      signedHeadsOfOtherKeys: otherKeys,
      latestSignedSeq: Math.max(0, ...heads.map((head) => head.seq)),
      problems,
    };
    io.stdout.write(JSON.stringify(report, null, 2) + '\n');
    return report.ok ? EXIT_SUCCESS : EXIT_FAILURE;
  },
};

function readPublicKey(file: string | undefined): KeyObject {
  if (file === undefined) throw new UsageError('--public-key <file> is required');
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    throw new UsageError(`cannot read the public key file ${file}`);
  }
  try {
    return parsePublicKey(text);
  } catch (error) {
    throw new UsageError(`${file} ${(error as Error).message}`);
  }
}

function expectedHead(seq: string | undefined, hash: string | undefined): ExpectedHead | undefined {
  if (seq === undefined && hash === undefined) return undefined;
  if (seq === undefined || hash === undefined) {
    throw new UsageError('--expected-seq and --expected-hash go together');
  }
  if (!/^[1-9][0-9]*$/.test(seq)) throw new UsageError('--expected-seq must be a whole number from 1');
  if (!/^[0-9a-f]{64}$/.test(hash)) throw new UsageError('--expected-hash must be 64 lowercase hex digits');
  return { seq: Number(seq), hash };
}

function keygen(args: string[], io: Parameters<Command['run']>[1]): number {
  const { values } = parseArgs({ args, options: { 'public-key': { type: 'string' } }, strict: true });
  const file = values['public-key'];
  if (file === undefined) throw new UsageError('--public-key <file> is required');
  if (existsSync(file)) throw new UsageError(`${file} exists; keygen never overwrites a key`);
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  writeFileSync(file, publicKey.export({ format: 'pem', type: 'spki' }), { flag: 'wx' });
  io.stderr.write(
    `public key written to ${file} (key id ${publicKeyId(publicKey)}); set CAIRN_AUDIT_SIGNING_KEY to the line below, keep it secret\n`,
  );
  io.stdout.write(`${privateKey.export({ format: 'der', type: 'pkcs8' }).toString('base64')}\n`);
  return EXIT_SUCCESS;
}
