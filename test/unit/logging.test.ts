import { describe, expect, it, vi } from 'vitest';

import { errorResponse } from '../../functions/http/errorResponse';
import { createLogger, errorSummary, processLogger, withLogSink } from '../../shared/logging';

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

  it('logs an error summarised before the serializer once, not as [object Object]', async () => {
    const lines: string[] = [];
    const error = Object.assign(new Error('table unreachable'), { code: 'ECONNREFUSED' });
    await withLogSink(
      'inv-summary',
      (line) => lines.push(line),
      async () => {
        processLogger('info')
          .child({ invocationId: 'inv-summary' })
          .warn({ err: errorSummary(error) }, 'failed');
      },
    );
    expect(lines.join('\n')).toContain(
      '"err":{"type":"Error","message":"table unreachable","code":"ECONNREFUSED"}',
    );
    // A plain object with more than a summary's fields is not taken for one.
    const thrown = { message: 'x', request: { headers: { authorization: 'SharedKey acct:signature' } } };
    expect(JSON.stringify(errorSummary(thrown))).not.toContain('signature');
  });

  it('never quotes the text a JSON parser failed on (it may be a stored value)', () => {
    let parseError: unknown;
    try {
      JSON.parse('hunter2-secret-value');
    } catch (error) {
      parseError = error;
    }
    const summary = errorSummary(new Error('wrapped', { cause: parseError }));
    expect(parseError).toBeInstanceOf(SyntaxError);
    expect(JSON.stringify(summary)).not.toContain('hunter2');
    expect(summary).toMatchObject({ cause: { type: 'SyntaxError' } });
  });

  it('routes the lines of a running invocation to its sink, and only while it runs', async () => {
    const log = processLogger('info');
    const mine: string[] = [];
    const other: string[] = [];
    let release = () => {};
    const running = withLogSink(
      'inv-a',
      (line) => mine.push(line),
      async () => {
        log.child({ invocationId: 'inv-a' }).info('first');
        await new Promise<void>((resolve) => (release = resolve));
        log.child({ invocationId: 'inv-a', tenant: 't' }).warn('second');
      },
    );
    // Another invocation running at the same time keeps its own lines.
    await withLogSink(
      'inv-b',
      (line) => other.push(line),
      async () => {
        log.child({ invocationId: 'inv-b' }).info('theirs');
        release();
        await running;
      },
    );
    expect(mine.map((line) => (JSON.parse(line) as { msg: string }).msg)).toEqual(['first', 'second']);
    expect(other.map((line) => (JSON.parse(line) as { msg: string }).msg)).toEqual(['theirs']);
    // Once it has settled, its id routes nowhere: the line goes to stdout.
    const stdout = vi.spyOn(process.stdout, 'write').mockImplementation(() => true);
    let written: string[];
    try {
      log.child({ invocationId: 'inv-a' }).info('late');
      written = stdout.mock.calls.map(([line]) => String(line));
    } finally {
      stdout.mockRestore();
    }
    expect(mine).toHaveLength(2);
    expect(written.filter((line) => line.includes('"late"'))).toHaveLength(1);
  });
});

describe('a system fault in the log', () => {
  it('is logged with its stack frames (not its first line, which repeats the message)', () => {
    const lines: string[] = [];
    let fault: unknown;
    try {
      JSON.parse('stored-secret-value');
    } catch (error) {
      fault = error;
    }
    const response = errorResponse(
      fault,
      createLogger('info', (line) => lines.push(line)),
    );
    expect(response.status).toBe(500);
    expect(lines).toHaveLength(1);
    const logged = JSON.parse(lines[0] ?? '{}') as { err?: { type?: string; stack?: string } };
    expect(logged.err?.type).toBe('SyntaxError');
    expect(logged.err?.stack).toMatch(/^at /);
    expect(lines[0]).not.toContain('stored-secret-value');
  });

  it('keeps the stack out of a summary unless asked for', () => {
    expect(errorSummary(new Error('plain'))).toEqual({ type: 'Error', message: 'plain' });
    expect(errorSummary(new Error('plain'), { stack: true })['stack']).toMatch(/^at /);
  });
});
