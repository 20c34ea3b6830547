import { createHash, generateKeyPairSync } from 'node:crypto';

import { describe, expect, it } from 'vitest';

import {
  type AuditRecord,
  canonicalJson,
  ChainVerifier,
  GENESIS_HASH,
  recordHash,
  withHash,
} from '../../shared/audit/chain';
import { parsePublicKey, signHead, verifyHeadSignature } from '../../shared/audit/headSignature';

function chain(length: number): AuditRecord[] {
  const records: AuditRecord[] = [];
  let prevHash = GENESIS_HASH;
  for (let seq = 1; seq <= length; seq++) {
    const record = withHash({
      seq,
      atMs: 1000 + seq,
      action: 'run.started',
      outcome: 'ok',
      eventId: `e${seq}`,
      prevHash,
    });
    records.push(record);
    prevHash = record.hash;
  }
  return records;
}

function verify(records: AuditRecord[], expected: { seq: number; hash: string }[] = []) {
  const verifier = new ChainVerifier(expected);
  for (const record of records) verifier.add(record);
  return verifier.result();
}

describe('canonical JSON (RFC 8785) and the record hash', () => {
  it('sorts keys by UTF-16 code units, writes no whitespace, numbers and strings as ECMAScript does', () => {
    expect(
      canonicalJson({ b: 1, a: [true, null, 'x'], '\u20ac': 2, '\ud83d\ude00': 3, A: { z: 0.5, y: 1e21 } }),
    ).toBe('{"A":{"y":1e+21,"z":0.5},"a":[true,null,"x"],"b":1,"€":2,"😀":3}');
    expect(canonicalJson({ text: 'line\nbreak "quoted" \u0001' })).toBe(
      '{"text":"line\\nbreak \\"quoted\\" \\u0001"}',
    );
    expect(canonicalJson({ skipped: undefined, kept: 0 })).toBe('{"kept":0}');
    expect(() => canonicalJson({ n: Number.NaN })).toThrow(TypeError);
  });

  it('hashes prevHash followed by the canonical JSON of the record without hash', () => {
    const record = {
      seq: 1,
      atMs: 5,
      action: 'run.started',
      outcome: 'ok',
      eventId: 'e1',
      prevHash: GENESIS_HASH,
    };
    const expected = createHash('sha256')
      .update(
        GENESIS_HASH +
          '{"action":"run.started","atMs":5,"eventId":"e1","outcome":"ok","prevHash":"' +
          GENESIS_HASH +
          '","seq":1}',
      )
      .digest('hex');
    expect(recordHash(record)).toBe(expected);
    expect(withHash(record).hash).toBe(expected);
  });
});

describe('chain verification', () => {
  it('accepts an intact chain and reports its head; an empty trail has the genesis head', () => {
    const records = chain(5);
    expect(verify(records)).toEqual({ ok: true, records: 5, firstBroken: null, head: [5, records[4]?.hash] });
    expect(verify([])).toEqual({ ok: true, records: 0, firstBroken: null, head: [0, GENESIS_HASH] });
  });

  it('names record k for a changed field, a deleted record, reordered records, a bad link', () => {
    const records = chain(6);
    expect(verify(records.map((r) => (r.seq === 3 ? { ...r, outcome: 'conflict' } : r))).firstBroken).toBe(3);
    expect(verify(records.filter((r) => r.seq !== 3)).firstBroken).toBe(3);
    const swapped = [...records];
    [swapped[2], swapped[3]] = [swapped[3] as AuditRecord, swapped[2] as AuditRecord];
    expect(verify(swapped).firstBroken).toBe(3);
    // Record 3 rewritten with its hash recomputed: the link from record 4 breaks.
    const rewritten = records.map((r) => (r.seq === 3 ? withHash({ ...r, outcome: 'forged' }) : r));
    expect(verify(rewritten).firstBroken).toBe(4);
  });

  it('with an expected head: a cut tail breaks at its first missing seq, a rebuilt chain at the expected seq', () => {
    const records = chain(6);
    const head = { seq: 6, hash: records[5]?.hash ?? '' };
    expect(verify(records.slice(0, 4))).toMatchObject({ ok: true });
    expect(verify(records.slice(0, 4), [head])).toMatchObject({ ok: false, firstBroken: 5 });
    const rebuilt = chain(6).map((r) => withHash({ ...r, atMs: 0 }));
    let prevHash = GENESIS_HASH;
    const relinked = rebuilt.map((r) => {
      const record = withHash({ ...r, prevHash });
      prevHash = record.hash;
      return record;
    });
    expect(verify(relinked)).toMatchObject({ ok: true });
    expect(verify(relinked, [head])).toMatchObject({ ok: false, firstBroken: 6 });
    expect(verify(records, [head])).toMatchObject({ ok: true });
  });
});

describe('signed heads', () => {
  it('verify with the public key alone; a changed head or another key fails', () => {
    const { privateKey, publicKey } = generateKeyPairSync('ed25519');
    const signed = signHead(privateKey, { tenant: 't1', seq: 4, hash: 'a'.repeat(64), signedAtMs: 7 });
    const pem = publicKey.export({ format: 'pem', type: 'spki' }).toString();
    expect(signed.keyId).toMatch(/^[0-9a-f]{16}$/);
    expect(verifyHeadSignature(parsePublicKey(pem), signed)).toBe(true);
    expect(verifyHeadSignature(parsePublicKey(pem), { ...signed, seq: 5 })).toBe(false);
    expect(verifyHeadSignature(parsePublicKey(pem), { ...signed, tenant: 't2' })).toBe(false);
    const other = generateKeyPairSync('ed25519').publicKey;
    expect(verifyHeadSignature(other, signed)).toBe(false);
    expect(() => parsePublicKey('nonsense')).toThrow(/not a public key/);
  });
});
