import { describe, expect, it } from 'vitest';

import { createLogger, errorSummary } from '../../shared/logging';

describe('logging', () => {
  it('writes JSON lines with the bound fields and redacts secrets passed by mistake', () => {
    const lines: string[] = [];
    const log = createLogger('info', (line) => lines.push(line), { invocationId: 'inv-1', function: 'kv' });
    log.child({ tenant: 't1' }).info(
      {
        authorization: 'Bearer s3cr3t',
        headers: { authorization: 'Bearer s3cr3t' },
        value: 'stored',
        token: 'tok',
      },
      'hello',
    );
    expect(lines).toHaveLength(1);
    const entry = JSON.parse(lines[0]!) as Record<string, unknown>;
    expect(entry).toMatchObject({ invocationId: 'inv-1', function: 'kv', tenant: 't1', msg: 'hello' });
    expect(lines[0]).not.toContain('s3cr3t');
    expect(lines[0]).not.toContain('stored');
    expect(lines[0]).not.toContain('tok"');
  });

  it('passes the level to the sink and drops lines below the configured level', () => {
    const levels: number[] = [];
    const log = createLogger('warn', (_line, level) => levels.push(level));
    log.info('dropped');
    log.warn('kept');
    log.error('kept too');
    expect(levels).toEqual([40, 50]);
  });

  it('summarises errors without their request objects', () => {
    const cause = Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' });
    const error = Object.assign(new Error('failed', { cause }), {
      statusCode: 503,
      request: { headers: { authorization: 'SharedKey acct:signature' } },
    });
    const summary = errorSummary(error);
    expect(summary).toEqual({
      type: 'Error',
      message: 'failed',
      statusCode: 503,
      cause: { type: 'Error', message: 'socket hang up', code: 'ECONNRESET' },
    });
    expect(JSON.stringify(summary)).not.toContain('signature');
  });
});
