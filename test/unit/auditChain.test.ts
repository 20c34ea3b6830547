import { createHash, generateKeyPairSync } from 'node:crypto';

import { describe, expect, it } from 'vitest';

import {
  type AuditRecord,
  ChainVerifier,
  GENESIS_HASH,
  recordHash,
  withHash,
} from '../../shared/protocol/audit/chain';
import {
  checkKeptHeads,
  checkSignedHeads,
  storedHead,
  unreadableHead,
} from '../../shared/protocol/audit/headChain';
import {
  parsePublicKey,
  type SignedHead,
  signHead,
  verifyHeadSignature,
} from '../../shared/protocol/audit/headSignature';
import { canonicalJson } from '../../shared/protocol/canonicalJson';

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

describe('the continuity of signed heads', () => {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  const records = chain(8);
  const hashAt = (seq: number) => records[seq - 1]?.hash ?? '';
  const head = (seq: number, prevSeq?: number) =>
    signHead(privateKey, {
      tenant: 't1',
      seq,
      hash: hashAt(seq),
      signedAtMs: seq,
      ...(prevSeq === undefined ? {} : { prevSeq, prevHash: prevSeq === 0 ? GENESIS_HASH : hashAt(prevSeq) }),
    });

  it('signs the link to the head before; a head signed without one still verifies', () => {
    const linked = head(4, 2);
    expect(linked).toMatchObject({ prevSeq: 2, prevHash: hashAt(2) });
    expect(verifyHeadSignature(publicKey, linked)).toBe(true);
    expect(verifyHeadSignature(publicKey, { ...linked, prevSeq: 1 })).toBe(false);
    // The link cannot be dropped from a head that was signed with it.
    expect(verifyHeadSignature(publicKey, { ...linked, prevSeq: undefined, prevHash: undefined })).toBe(
      false,
    );
    expect(verifyHeadSignature(publicKey, head(4))).toBe(true);
  });

  it('a chain of heads holds; a head removed from between two, or forged, does not', () => {
    const heads = [head(2, 0), head(5, 2), head(8, 5)];
    const intact = checkSignedHeads('t1', heads, publicKey);
    expect(intact).toMatchObject({ problems: [], checked: 3, otherKeys: 0, latest: heads[2] });
    expect(verify(records, intact.expected)).toMatchObject({ ok: true });
    // Concurrent signers may both extend one head; heads signed before links name none.
    expect(checkSignedHeads('t1', [head(1), head(2, 0), head(5, 2), head(6, 2)], publicKey).problems).toEqual(
      [],
    );

    expect(checkSignedHeads('t1', [heads[0], heads[2]] as SignedHead[], publicKey).problems).toEqual([
      {
        seq: 5,
        message:
          'the head at seq 8 extends the signed head at seq 5, which is gone (signed heads were removed)',
      },
    ]);
    const forged = { ...(heads[1] as SignedHead), hash: 'f'.repeat(64) };
    expect(checkSignedHeads('t1', [heads[0], forged, heads[2]] as SignedHead[], publicKey).problems).toEqual([
      { seq: 5, message: 'the signature of the head at seq 5 does not verify' },
    ]);
    expect(checkSignedHeads('t2', heads, publicKey).problems.map((problem) => problem.seq)).toEqual([
      2, 5, 8,
    ]);
    const other = generateKeyPairSync('ed25519').publicKey;
    expect(checkSignedHeads('t1', heads, other)).toMatchObject({ problems: [], checked: 0, otherKeys: 3 });
  });

  it('a stored head that is not one (not JSON, not an object) is reported at its seq, once', () => {
    const heads = [head(2, 0), head(5, 2), head(8, 5)];
    for (const text of ['{"not": "a head"', 'null', '[1]']) {
      const damaged = storedHead('t1', 5, text);
      expect(damaged).toEqual(unreadableHead('t1', 5));
      expect(
        checkSignedHeads('t1', [heads[0], damaged, heads[2]] as SignedHead[], publicKey).problems,
      ).toEqual([{ seq: 5, message: 'the signed head at seq 5 is not readable' }]);
    }
    expect(storedHead('t1', 5, JSON.stringify(heads[1]))).toEqual(heads[1]);
  });

  it('heads kept elsewhere: the trail must hold them, and the stored heads must not end before them', () => {
    const kept = [head(3, 0), head(6, 3)];
    expect(checkKeptHeads(kept, publicKey, 6)).toEqual({
      expected: [
        { seq: 3, hash: hashAt(3) },
        { seq: 6, hash: hashAt(6) },
      ],
      problems: [],
    });
    expect(checkKeptHeads(kept, publicKey, 3).problems).toEqual([
      {
        seq: 4,
        message:
          "the service's signed heads end at seq 3, before the kept head at seq 6 (signed heads were removed, or the trail was cut)",
      },
    ]);
    // Rebuilt from scratch: record 1 changed, every hash recomputed (a consistent chain).
    let prevHash = GENESIS_HASH;
    const rebuilt = records.map((record) => {
      const forged = withHash({ ...record, ...(record.seq === 1 ? { actor: 'x' } : {}), prevHash });
      prevHash = forged.hash;
      return forged;
    });
    expect(verify(rebuilt)).toMatchObject({ ok: true });
    expect(verify(rebuilt, checkKeptHeads(kept, publicKey, 8).expected)).toMatchObject({
      ok: false,
      firstBroken: 3,
    });
    expect(verify(records.slice(0, 4), checkKeptHeads(kept, publicKey, 8).expected)).toMatchObject({
      ok: false,
      firstBroken: 5,
    });
    expect(checkKeptHeads([{ ...(kept[0] as SignedHead), seq: 4 }], publicKey, 8).problems).toEqual([
      { seq: 4, message: 'the signature of the kept head at seq 4 does not verify' },
    ]);
  });
});
