import { describe, expect, it } from 'vitest';

import { emailPollScheduleFrom, loadConfig } from '../../shared/config';
import {
  type ChatCursor,
  isCursorStale,
  mergedChatCursor,
  undeliveredIds,
} from '../../shared/coordination/chatCursors';
import { chatIdProblem, encodeChatId } from '../../shared/coordination/chatIds';
import {
  formatEmailCursorValue,
  parseEmailCursorValue,
  type PresentEmailCursor,
  recentClaimsWith,
} from '../../shared/coordination/emailCursor';
import { MAX_PENDING_WINDOWS, planEmailClaim } from '../../shared/coordination/emailWindowPoll';
import {
  decodeEmailWindowMessage,
  encodeEmailWindowMessage,
} from '../../shared/coordination/emailWindowQueue';
import { compareTimestamps, isRfc3339, isUtcDay, laterTimestamp } from '../../shared/coordination/timestamps';
import { ConfigurationError } from '../../shared/protocol/errors';

/** The pure parts of fleet coordination: value formats, ids, time, plans, settings. */

describe('timestamps', () => {
  it('accepts RFC 3339 date-times with a zone and refuses the rest', () => {
    for (const value of [
      '2026-11-29T21:16:51Z',
      '2026-11-29T21:16:51.123Z',
      '2026-11-29t21:16:51.123456789z',
      '2026-11-29T22:16:51+01:00',
    ]) {
      expect(isRfc3339(value), value).toBe(true);
    }
    for (const value of [
      '2026-11-29',
      '2026-11-29T21:16:51',
      '2026-02-30T00:00:00Z',
      '2026-13-01T00:00:00Z',
      '2026-11-29T24:00:00Z',
      'now',
      ' 2026-11-29T21:16:51Z',
    ]) {
      expect(isRfc3339(value), value).toBe(false);
    }
  });

  it('orders by instant: fractions and offsets count, and the later of two is kept', () => {
    expect(compareTimestamps('2026-04-17T10:00:15Z', '2026-04-17T10:00:15.261Z')).toBeLessThan(0);
    expect(compareTimestamps('2026-04-17T11:00:15+01:00', '2026-04-17T10:00:15Z')).toBe(0);
    expect(compareTimestamps('2026-04-17T10:00:15.0000001Z', '2026-04-17T10:00:15Z')).toBeGreaterThan(0);
    expect(laterTimestamp('2026-04-17T10:00:15.261Z', '2026-04-17T10:00:15Z')).toBe(
      '2026-04-17T10:00:15.261Z',
    );
    expect(laterTimestamp(null, '2026-04-17T10:00:15Z')).toBe('2026-04-17T10:00:15Z');
    expect(laterTimestamp('b', 'a')).toBe('b');
  });

  it('knows real UTC days', () => {
    expect(isUtcDay('2024-02-29')).toBe(true);
    expect(isUtcDay('2026-02-29')).toBe(false);
    expect(isUtcDay('2026-1-01')).toBe(false);
  });
});

describe('chat ids', () => {
  it('percent-encodes everything but unreserved ASCII, in upper-case hex', () => {
    expect(encodeChatId('19:c@thread.v2')).toBe('19%3Ac%40thread.v2');
    expect(encodeChatId("a!b'(c)*")).toBe('a%21b%27%28c%29%2A');
    expect(encodeChatId('A-z_0.9~')).toBe('A-z_0.9~');
    expect(encodeChatId('é')).toBe('%C3%A9');
  });

  it('refuses ids that cannot go into a URL path or a key', () => {
    for (const bad of [
      '',
      'a b',
      'a\tb',
      'a/b',
      'a\\b',
      'a?b',
      'a#b',
      'a%b',
      'a\u0000b',
      'a\u007fb',
      'a\u0085b',
      'x'.repeat(251),
    ]) {
      expect(chatIdProblem(bad), JSON.stringify(bad)).not.toBeNull();
    }
    expect(chatIdProblem('19:meeting_abc@thread.v2')).toBeNull();
    expect(chatIdProblem('x'.repeat(250))).toBeNull();
  });
});

describe('email cursor values', () => {
  const state = {
    cursor: '2026-11-29T21:16:51.123Z',
    recentClaims: ['c1', 'c2'],
    pendingWindows: [
      {
        from: '2026-11-29T21:15:51.123Z',
        to: '2026-11-29T21:16:51.123Z',
        claimId: 'c2',
        leaseExpires: '2026-11-29T21:21:51.123Z',
      },
    ],
  };

  it('is one line of JSON, cursor first, that reads back as it was written', () => {
    const bytes = formatEmailCursorValue(state);
    expect(bytes.toString()).toMatch(
      /^\{"cursor":"2026-11-29T21:16:51\.123Z","recentClaims":\["c1","c2"\],"pendingWindows":\[.*\]\}\n$/,
    );
    expect(parseEmailCursorValue(bytes)).toEqual(state);
  });

  it('reads a bare timestamp (the format older agents write) and refuses what it does not understand', () => {
    expect(parseEmailCursorValue(Buffer.from(' 2026-11-29T21:16:51Z\n'))).toEqual({
      cursor: '2026-11-29T21:16:51Z',
      recentClaims: [],
      pendingWindows: [],
    });
    for (const bad of [
      '',
      'null',
      '{}',
      '{"cursor":"2026-11-29T21:16:51Z","recentClaims":[1]}',
      '{"cursor":"2026-11-29T21:16:51Z","pendingWindows":[{"from":"x"}]}',
    ]) {
      expect(parseEmailCursorValue(Buffer.from(bad)), bad).toHaveProperty('problem');
    }
    expect(parseEmailCursorValue(Buffer.from([0xff, 0xfe]))).toHaveProperty('problem');
  });

  it('keeps the 16 most recent claim ids, the new one last, once', () => {
    expect(recentClaimsWith(['a', 'b'], 'a')).toEqual(['b', 'a']);
    const many = Array.from({ length: 30 }, (_, i) => `c${i}`);
    expect(recentClaimsWith(many, 'new')).toEqual([...many.slice(15), 'new']);
  });

  it('encodes queue messages as base64 JSON with exactly tenant, from, to and claimId', () => {
    const message = { tenant: 't', from: 'a', to: 'b', claimId: 'c' };
    const text = encodeEmailWindowMessage({ ...message, extra: 1 } as typeof message);
    expect(JSON.parse(Buffer.from(text, 'base64').toString())).toEqual(message);
    expect(decodeEmailWindowMessage(text)).toEqual(message);
  });
});

describe('planning a timer claim', () => {
  const now = new Date('2026-11-29T21:10:00.000Z');
  const cursor = (
    pendingWindows: PresentEmailCursor['pendingWindows'],
    at = '2026-11-29T21:09:00.000Z',
  ): PresentEmailCursor => ({
    outcome: 'present',
    etag: '"e"',
    cursor: at,
    recentClaims: ['old'],
    pendingWindows,
  });
  const window = (claimId: string, leaseExpires: string) => ({
    from: '2026-11-29T21:00:00.000Z',
    to: '2026-11-29T21:01:00.000Z',
    claimId,
    leaseExpires,
  });

  it('claims the window from the cursor to now, leased, and records the claim id', () => {
    const plan = planEmailClaim(cursor([]), now, 'new', 60_000);
    expect(plan?.owned).toEqual([
      {
        from: '2026-11-29T21:09:00.000Z',
        to: now.toISOString(),
        claimId: 'new',
        leaseExpires: '2026-11-29T21:11:00.000Z',
      },
    ]);
    expect(plan?.state).toEqual({
      cursor: now.toISOString(),
      recentClaims: ['old', 'new'],
      pendingWindows: plan?.owned,
    });
  });

  it('takes over windows whose lease ended and leaves leased ones alone', () => {
    const expired = window('expired', '2026-11-29T21:10:00.000Z');
    const leased = window('leased', '2026-11-29T21:10:00.001Z');
    const plan = planEmailClaim(cursor([expired, leased]), now, 'new', 60_000);
    expect(plan?.owned.map((w) => w.claimId)).toEqual(['expired', 'new']);
    expect(plan?.state.pendingWindows.find((w) => w.claimId === 'leased')).toEqual(leased);
  });

  it('claims nothing when the window is empty and nothing expired, and no new window when too many are pending', () => {
    expect(planEmailClaim(cursor([], now.toISOString()), now, 'new')).toBeNull();
    const full = Array.from({ length: MAX_PENDING_WINDOWS }, (_, i) =>
      window(`w${i}`, '2026-11-29T22:00:00.000Z'),
    );
    expect(planEmailClaim(cursor(full), now, 'new')).toBeNull();
  });
});

describe('chat cursor rules', () => {
  const cursor = (seenIdsTail: string[], lastWrittenAt: string | null = null): ChatCursor => ({
    lastTs: null,
    seenIdsTail,
    bootstrapped: true,
    lastWrittenAt,
  });

  it('judges staleness by write time over 24 hours; a missing write time is stale', () => {
    const now = new Date('2026-11-29T12:00:00.000Z');
    expect(isCursorStale(cursor([], '2026-11-28T12:00:00.000Z'), now)).toBe(false);
    expect(isCursorStale(cursor([], '2026-11-28T11:59:59.999Z'), now)).toBe(true);
    expect(isCursorStale(cursor([]), now)).toBe(true);
    expect(isCursorStale(cursor([], 'garbage'), now)).toBe(true);
  });

  it('offers each new id once, in candidate order', () => {
    expect(undeliveredIds(cursor(['b']), ['c', 'b', 'a', 'c'])).toEqual(['c', 'a']);
    expect(undeliveredIds(null, ['x', 'x'])).toEqual(['x']);
  });

  it('merges into a sorted tail of the 50 largest ids, stamped now', () => {
    const now = new Date('2026-11-29T12:00:00.000Z');
    const seen = Array.from({ length: 50 }, (_, i) => String(100 + i));
    const merged = mergedChatCursor(cursor(seen), ['200', '050'], '2026-11-29T11:00:00Z', now);
    expect(merged.seenIdsTail).toEqual([...seen.slice(1), '200']);
    expect(merged).toMatchObject({
      bootstrapped: true,
      lastWrittenAt: now.toISOString(),
      lastTs: '2026-11-29T11:00:00Z',
    });
  });
});

describe('coordination settings', () => {
  const KEYS = `dev:${'a'.repeat(64)}`;

  function configError(env: Record<string, string>): ConfigurationError {
    try {
      loadConfig({ CAIRN_API_KEYS: KEYS, ...env }, '/srv/app');
    } catch (error) {
      if (error instanceof ConfigurationError) return error;
      throw error;
    }
    throw new Error('expected a ConfigurationError');
  }

  it('defaults to every minute on the email-windows queue, with no queue service configured', () => {
    expect(loadConfig({ CAIRN_API_KEYS: KEYS }, '/srv/app').emailPoll).toEqual({
      schedule: '0 */1 * * * *',
      queueName: 'email-windows',
    });
    expect(emailPollScheduleFrom({})).toBe('0 */1 * * * *');
  });

  it('reads the queue endpoint with the Blob credential rules', () => {
    expect(
      loadConfig(
        {
          CAIRN_API_KEYS: KEYS,
          CAIRN_QUEUE_ENDPOINT: 'https://acct.queue.core.windows.net/',
          AZURE_CLIENT_ID: 'id-1',
        },
        '/srv/app',
      ).emailPoll.queueService,
    ).toEqual({
      endpoint: 'https://acct.queue.core.windows.net',
      accountName: 'acct',
      managedIdentityClientId: 'id-1',
    });
    expect(
      loadConfig(
        {
          CAIRN_API_KEYS: KEYS,
          CAIRN_QUEUE_ENDPOINT: 'http://127.0.0.1:10001/devstoreaccount1',
          CAIRN_STORAGE_ACCOUNT_KEY: 'a2V5',
        },
        '/srv/app',
      ).emailPoll.queueService,
    ).toEqual({
      endpoint: 'http://127.0.0.1:10001/devstoreaccount1',
      accountName: 'devstoreaccount1',
      accountKey: 'a2V5',
    });
  });

  it('fails loud, naming the setting', () => {
    expect(configError({ CAIRN_QUEUE_ENDPOINT: 'https://acct.queue.core.windows.net' }).setting).toBe(
      'AZURE_CLIENT_ID',
    );
    expect(configError({ CAIRN_QUEUE_ENDPOINT: 'queue', AZURE_CLIENT_ID: 'x' }).setting).toBe(
      'CAIRN_QUEUE_ENDPOINT',
    );
    expect(configError({ CAIRN_EMAIL_WINDOW_QUEUE: 'Email_Windows' }).setting).toBe(
      'CAIRN_EMAIL_WINDOW_QUEUE',
    );
    expect(configError({ CAIRN_EMAIL_WINDOW_QUEUE: 'ab' }).setting).toBe('CAIRN_EMAIL_WINDOW_QUEUE');
    expect(configError({ CAIRN_EMAIL_POLL_SCHEDULE: '*/5 * * * *' }).setting).toBe(
      'CAIRN_EMAIL_POLL_SCHEDULE',
    );
    expect(configError({ CAIRN_EMAIL_POLL_SCHEDULE: '61 * * * * *' }).setting).toBe(
      'CAIRN_EMAIL_POLL_SCHEDULE',
    );
    expect(
      loadConfig({ CAIRN_API_KEYS: KEYS, CAIRN_EMAIL_POLL_SCHEDULE: '*/30  * * * * *' }, '/srv/app').emailPoll
        .schedule,
    ).toBe('*/30 * * * * *');
  });
});
