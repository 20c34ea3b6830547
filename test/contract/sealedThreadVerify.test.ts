import { randomBytes } from 'node:crypto';

import { afterEach, beforeEach, describe, expect, it } from 'vitest';

import { Encryption } from '../../shared/crypto/encryption';
import { SEAL_OVERHEAD } from '../../shared/crypto/sealedFormat';
import { VerifyCollector } from '../../shared/retention/verifyReport';
import type { KeyValueStore } from '../../shared/storage/keyValueStore';
import { keysOf } from '../../shared/threads/layout';
import { decodeThreadRecord } from '../../shared/threads/records';
import { SealedThreadSpace } from '../../shared/threads/sealedThreadSpace';
import { ThreadStore } from '../../shared/threads/threadStore';
import { threadVerifyPart } from '../../shared/threads/threadVerify';
import { azurite } from '../support/azurite';
import { putLine } from '../support/retentionSeed';
import {
  type Backend,
  createRetentionWorld,
  MAX_VALUE_BYTES,
  type RetentionWorld,
} from '../support/retentionWorld';

/**
 * `cairn verify` of a tenant whose thread space is sealed at rest: a stored record that does not
 * open is damage to report (`unreadable`, docs/retention.md), as one that does not decode is; it
 * must not end the whole verification with an error that names no key.
 */

const T = 'tenant-sealed';

describe.each<Backend>(['local', 'blob'])('verify of sealed threads on the %s backend', (backend) => {
  let world: RetentionWorld;
  let raw: KeyValueStore;
  let sealed: KeyValueStore;

  beforeEach(async () => {
    world = await createRetentionWorld(backend, azurite());
    const encryption = new Encryption({
      keys: [{ id: 'k1', key: randomBytes(32) }],
      kvStores: world.kvStores,
      policy: new Set([T]),
    });
    await encryption.check();
    raw = world.kvStores.forSpace('threads', T);
    sealed = new SealedThreadSpace(raw, T, encryption.codec);
    const threads = new ThreadStore({
      storeOf: () => sealed,
      maxValueBytes: MAX_VALUE_BYTES - SEAL_OVERHEAD,
      sealed: true,
    });
    await putLine(threads, T, 't', 3);
  });
  afterEach(async () => world.destroy());

  const verify = async () => {
    const collector = new VerifyCollector(Date.now(), 0);
    await threadVerifyPart(() => sealed, true).verify(T, new Set(['threads']), collector, {
      readData: true,
      oneIn: 1,
      random: Math.random,
    });
    return collector;
  };

  /** Flips one byte of the sealed bytes stored at `key` (damage outside Cairn). */
  const tamper = async (key: string) => {
    const stored = (await raw.read(key))!.value;
    const changed = Buffer.from(stored);
    changed.writeUInt8(changed.readUInt8(changed.length - 1) ^ 0xff, changed.length - 1);
    await raw.write(key, changed);
  };

  it('a checkpoint record that does not open is reported unreadable, and the rest is still verified', async () => {
    expect((await verify()).findingCount).toBe(0);
    const thread = decodeThreadRecord((await sealed.read('t/t'))!.value, 't');
    const record = keysOf(thread).record('c001', '');
    await tamper(record);

    const collector = await verify();
    expect(collector.findings.map(({ kind, key }) => [kind, key])).toContainEqual(['unreadable', record]);
    expect(collector.checked.threads).toBe(1);
  });

  it('a thread record that does not open is reported unreadable, its data not as garbage', async () => {
    await tamper('t/t');
    const collector = await verify();
    expect(collector.findings.map(({ kind, key }) => [kind, key])).toContainEqual(['unreadable', 't/t']);
    // Whose data it is cannot be told (the prune refuses the thread too): none of it is collectable.
    expect(collector.orphans.filter((orphan) => orphan.key.startsWith('d/t/'))).toEqual([]);
  });
});
