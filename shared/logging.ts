import pino, { type Logger } from 'pino';

export type { Logger } from 'pino';

/** Where a log line goes: the Functions invocation context in the host, stdout elsewhere. */
export type LogSink = (line: string, level: number) => void;

/**
 * Paths that must never reach a log, whatever a caller passes by mistake. Cairn itself never logs
 * credentials, stored values or request bodies; this is the second line of defence.
 */
const REDACTED_PATHS = [
  'authorization',
  '*.authorization',
  'headers.authorization',
  '*.headers.authorization',
  'token',
  '*.token',
  'apiKey',
  '*.apiKey',
  'accountKey',
  '*.accountKey',
  'value',
  '*.value',
  'body',
  '*.body',
];

const invocationSinks = new Map<string, LogSink>();
const routedLoggers = new Map<string, Logger>();
const INVOCATION_ID = /"invocationId":"([^"]*)"/;

/**
 * Runs `fn` with the lines that carry `invocationId` going to `sink` (the invocation's context in
 * the Functions host) until it settles. Routing by the id each line carries (rather than by async
 * context) keeps async hooks off the hot path; a line that names no running invocation goes to
 * stdout.
 */
export async function withLogSink<T>(invocationId: string, sink: LogSink, fn: () => Promise<T>): Promise<T> {
  invocationSinks.set(invocationId, sink);
  try {
    return await fn();
  } finally {
    invocationSinks.delete(invocationId);
  }
}

/**
 * The process's logger at `level`, built once (a pino instance costs far more than a child): its
 * lines go to the sink of the invocation they name ({@link withLogSink}), else stdout. Per
 * invocation, use `.child({ invocationId, function, tenant })`.
 */
export function processLogger(level: string): Logger {
  let logger = routedLoggers.get(level);
  if (logger === undefined) {
    logger = createLogger(level, (line, lineLevel) => {
      const invocationId = INVOCATION_ID.exec(line)?.[1];
      const sink = invocationId === undefined ? undefined : invocationSinks.get(invocationId);
      if (sink === undefined) process.stdout.write(line + '\n');
      else sink(line, lineLevel);
    });
    routedLoggers.set(level, logger);
  }
  return logger;
}

/** A pino logger writing structured JSON lines to `sink`, with `bindings` on every line. */
export function createLogger(level: string, sink: LogSink, bindings: Record<string, unknown> = {}): Logger {
  return pino(
    {
      level,
      base: bindings,
      redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
      serializers: { err: errorSummary },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    {
      write(line: string) {
        const level = Number(/"level":(\d+)/.exec(line)?.[1] ?? 30);
        sink(line.trimEnd(), level);
      },
    },
  );
}

/**
 * What of an error is logged: type, message, codes and the chain of causes. Never the whole object:
 * SDK errors carry requests, and requests carry headers.
 */
export function errorSummary(error: unknown, options: { stack?: boolean } = {}): Record<string, unknown> {
  // Already a summary (a caller summarised it before the logger's serializer does): kept as it is.
  if (isSummary(error)) return error;
  if (!(error instanceof Error)) return { message: String(error) };
  const e = error as Error & { code?: unknown; statusCode?: unknown };
  const frames = options.stack === true ? stackFrames(e) : undefined;
  return {
    type: e.name,
    // A parser's message quotes the text it failed on, which may be a stored value: never logged.
    message: e instanceof SyntaxError ? 'the text is not valid JSON' : e.message,
    ...(e.code === undefined ? {} : { code: e.code }),
    ...(e.statusCode === undefined ? {} : { statusCode: e.statusCode }),
    ...(e.cause === undefined ? {} : { cause: errorSummary(e.cause) }),
    ...(frames === undefined ? {} : { stack: frames }),
  };
}

/**
 * The `at …` lines of an error's stack, without the first line: that repeats the message, and a
 * parser's message may quote a stored value. Logged for system faults (a 500, a failed timer run).
 */
function stackFrames(error: Error): string | undefined {
  const frames = (error.stack ?? '')
    .split('\n')
    .filter((line) => /^\s+at /.test(line))
    .map((line) => line.trim());
  return frames.length === 0 ? undefined : frames.join('\n');
}

const SUMMARY_FIELDS = new Set(['type', 'message', 'code', 'statusCode', 'cause', 'stack']);

/** A plain object of the summary's fields only (anything more is logged as an unknown value). */
function isSummary(value: unknown): value is Record<string, unknown> {
  return (
    typeof value === 'object' &&
    value !== null &&
    Object.getPrototypeOf(value) === Object.prototype &&
    typeof (value as { message?: unknown }).message === 'string' &&
    Object.keys(value).every((key) => SUMMARY_FIELDS.has(key))
  );
}
