import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

import { ChainVerifier, type ExpectedHead } from '@cairn-state/protocol/audit/chain';
import { checkKeptHeads, checkSignedHeads } from '@cairn-state/protocol/audit/headChain';
import { parsePublicKey, publicKeyId, type SignedHead } from '@cairn-state/protocol/audit/headSignature';

import { type Command, EXIT_FAILURE, EXIT_SUCCESS, UsageError } from './command.js';

/**
 * `cairn audit verify --public-key <file>`: reads the caller's tenant's whole audit trail and its
 * signed heads from the service and checks them here, trusting nothing the service computed: every
 * record's seq, link and hash; every head signed by the public key (its signature, that the trail
 * still holds that seq with that hash, so a cut tail or a rewritten chain fails, and that the head
 * it extends is still there: see the protocol's audit/headChain.ts); and that at least one head is signed
 * by that key. `--heads <file>` adds heads kept elsewhere (a JSON array of signed heads, or a
 * `GET /api/audit/heads` answer): the trail must still hold each, and the service's heads must not
 * end before them. `--save-heads <file>` writes, when everything holds, the kept heads and the
 * service's heads of the key (one per seq) to the file, to pass as `--heads` next time. Prints a
 * JSON report; exit 0 clean, 1 problems, 2 usage.
 *
 * `cairn audit keygen --public-key <file>`: makes an Ed25519 key pair, writes the public key (PEM)
 * to the file (never over an existing one) and prints the private key for CAIRN_AUDIT_SIGNING_KEY
 * (base64 of its PKCS#8 DER) on stdout.
 */
export const auditCommand: Command = {
  usage: `  cairn audit verify --public-key <file> [--heads <file>] [--save-heads <file>]
                    [--expected-seq <n> --expected-hash <hex>]
  cairn audit keygen --public-key <file>`,

  async run(args, io) {
    const [action, ...rest] = args;
    if (action === 'keygen') return keygen(rest, io);
    if (action !== 'verify') throw new UsageError('the audit actions are verify and keygen');
    const { values } = parseArgs({
      args: rest,
      options: {
        'public-key': { type: 'string' },
        heads: { type: 'string' },
        'save-heads': { type: 'string' },
        'expected-seq': { type: 'string' },
        'expected-hash': { type: 'string' },
      },
      strict: true,
    });
    const publicKey = readPublicKey(values['public-key']);
    const expected = expectedHead(values['expected-seq'], values['expected-hash']);
    const kept = values.heads === undefined ? [] : readKeptHeads(values.heads);
    const audit = io.connect().audit;

    const stored: SignedHead[] = [];
    for await (const head of audit.allHeads()) stored.push(head);
    // The tenant is the one the service's heads name, else the kept heads' (one tenant per file).
    const tenant = stored[0]?.tenant ?? kept[0]?.tenant ?? '';
    const heads = checkSignedHeads(tenant, stored, publicKey);
    const latestSeq = heads.latest?.seq ?? 0;
    const keptCheck = checkKeptHeads(kept, publicKey, latestSeq);
    const problems = [...heads.problems, ...keptCheck.problems].map((problem) => problem.message);
    if (kept.some((head) => head.tenant !== tenant)) {
      problems.push(`the kept heads are not all the tenant ${tenant}'s`);
    }
    const verifier = new ChainVerifier([
      ...heads.expected,
      ...keptCheck.expected,
      ...(expected === undefined ? [] : [expected]),
    ]);
    for await (const record of audit.allRecords()) verifier.add(record);
    const { result, problem } = verifier.check();
    if (problem !== null) problems.unshift(`the trail is broken at seq ${result.firstBroken}: ${problem}`);
    if (heads.checked === 0) problems.push('no head of the trail is signed by this key');
    const report = {
      ok: problems.length === 0,
      records: result.records,
      head: result.head,
      firstBroken: result.firstBroken,
      signedHeadsChecked: heads.checked,
      signedHeadsOfOtherKeys: heads.otherKeys,
      keptHeadsChecked: keptCheck.expected.length,
      latestSignedSeq: latestSeq,
      problems,
    };
    const saveTo = values['save-heads'];
    if (report.ok && saveTo !== undefined) {
      const bySeq = new Map<number, SignedHead>();
      for (const head of kept) bySeq.set(head.seq, head);
      for (const head of stored) if (head.keyId === publicKeyId(publicKey)) bySeq.set(head.seq, head);
      writeHeads(
        saveTo,
        [...bySeq.values()].sort((a, b) => a.seq - b.seq),
      );
    }
    io.stdout.write(JSON.stringify(report, null, 2) + '\n');
    return report.ok ? EXIT_SUCCESS : EXIT_FAILURE;
  },
};

/** Heads kept elsewhere: a JSON array of signed heads, or an answer of `GET /api/audit/heads`. */
function readKeptHeads(file: string): SignedHead[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(file, 'utf8'));
  } catch {
    throw new UsageError(`--heads: cannot read the heads file ${file} as JSON`);
  }
  const list =
    typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)
      ? (parsed as { heads?: unknown }).heads
      : parsed;
  if (!Array.isArray(list) || !list.every(isSignedHead)) {
    throw new UsageError(
      `${file} holds no list of signed heads (tenant, seq, hash, signedAtMs, keyId, signature)`,
    );
  }
  if (new Set(list.map((head) => head.tenant)).size > 1) {
    throw new UsageError(`${file} holds heads of several tenants; keep one file per tenant`);
  }
  return list;
}

function isSignedHead(value: unknown): value is SignedHead {
  if (typeof value !== 'object' || value === null) return false;
  const head = value as Record<string, unknown>;
  return (
    typeof head['tenant'] === 'string' &&
    Number.isSafeInteger(head['seq']) &&
    (head['seq'] as number) >= 1 &&
    typeof head['hash'] === 'string' &&
    typeof head['signedAtMs'] === 'number' &&
    typeof head['keyId'] === 'string' &&
    typeof head['signature'] === 'string' &&
    (head['prevSeq'] === undefined || Number.isSafeInteger(head['prevSeq'])) &&
    (head['prevHash'] === undefined || typeof head['prevHash'] === 'string')
  );
}

/** Writes the heads to `file` whole or not at all (a temporary file beside it, then a rename). */
function writeHeads(file: string, heads: SignedHead[]): void {
  const temporary = `${file}.${process.pid}.tmp`;
  writeFileSync(temporary, JSON.stringify(heads, null, 2) + '\n');
  renameSync(temporary, file);
}

function readPublicKey(file: string | undefined): KeyObject {
  if (file === undefined) throw new UsageError('--public-key <file> is required');
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    throw new UsageError(`--public-key: cannot read the public key file ${file}`);
  }
  try {
    return parsePublicKey(text);
  } catch (error) {
    throw new UsageError(`--public-key: ${file} ${(error as Error).message}`);
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
  if (existsSync(file)) throw new UsageError(`--public-key: ${file} exists; keygen never overwrites a key`);
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  writeFileSync(file, publicKey.export({ format: 'pem', type: 'spki' }), { flag: 'wx' });
  io.stderr.write(
    `public key written to ${file} (key id ${publicKeyId(publicKey)}); set CAIRN_AUDIT_SIGNING_KEY to the line below, keep it secret\n`,
  );
  io.stdout.write(`${privateKey.export({ format: 'der', type: 'pkcs8' }).toString('base64')}\n`);
  return EXIT_SUCCESS;
}
