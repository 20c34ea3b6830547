import { readFileSync } from 'node:fs';

/**
 * Small measuring kit for the benchmarks: run an operation a fixed number of times with a given
 * concurrency, and report throughput and latency percentiles. No timing is asserted anywhere: the
 * figures are printed, and compared only as ratios measured in the same run.
 */

export interface Measurement {
  readonly ops: number;
  readonly seconds: number;
  readonly latenciesMs: number[];
}

export interface Summary {
  readonly opsPerSecond: number;
  readonly p50Ms: number;
  readonly p95Ms: number;
  readonly p99Ms: number;
  /** With `alternate`'s `cost`: how much it grew per operation while this side ran. */
  readonly costPerOp?: number;
}

/** Runs `operation(worker, index)` `count` times with `concurrency` workers. */
export async function measure(
  count: number,
  concurrency: number,
  operation: (worker: number, index: number) => Promise<unknown>,
): Promise<Measurement> {
  const latenciesMs: number[] = [];
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async (_, worker) => {
      while (next < count) {
        const index = next++;
        const begin = performance.now();
        await operation(worker, index);
        latenciesMs.push(performance.now() - begin);
      }
    }),
  );
  return { ops: count, seconds: (performance.now() - started) / 1000, latenciesMs };
}

export function combine(measurements: readonly Measurement[]): Measurement {
  return {
    ops: measurements.reduce((sum, m) => sum + m.ops, 0),
    seconds: measurements.reduce((sum, m) => sum + m.seconds, 0),
    latenciesMs: measurements.flatMap((m) => m.latenciesMs),
  };
}

export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}

export function summarise(measurement: Measurement): Summary {
  const sorted = [...measurement.latenciesMs].sort((a, b) => a - b);
  return {
    opsPerSecond: measurement.ops / measurement.seconds,
    p50Ms: percentile(sorted, 50),
    p95Ms: percentile(sorted, 95),
    p99Ms: percentile(sorted, 99),
  };
}

/** CPU time (user and system, ms) a process has used so far, from /proc (Linux); NaN elsewhere. */
export function processCpuMs(pid: number): number {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
    // utime and stime, in clock ticks (100 per second on Linux).
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return NaN;
  }
}

/** Resident set size of a process, in MB, from /proc (Linux). */
export function rssMb(pid: number): number {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? NaN);
    return kb / 1024;
  } catch {
    return NaN;
  }
}

/**
 * Samples a process's RSS every `intervalMs` until stopped; returns the peak. Samples taken once the
 * process has exited (nothing left to read) do not count.
 */
export function watchRss(pid: number, intervalMs = 100): { stop(): number } {
  let peak = 0;
  const sample = () => {
    const mb = rssMb(pid);
    if (Number.isFinite(mb)) peak = Math.max(peak, mb);
  };
  sample();
  const timer = setInterval(sample, intervalMs);
  return {
    stop() {
      clearInterval(timer);
      sample();
      return peak;
    },
  };
}

export function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const line = (cells: readonly string[]) => `| ${cells.join(' | ')} |`;
  return [line(header), line(header.map(() => '---')), ...rows.map(line)].join('\n');
}

export const fixed = (value: number, digits = 1) => (Number.isFinite(value) ? value.toFixed(digits) : 'n/a');

type Operation = (worker: number, index: number) => Promise<unknown>;
type AlternateOptions = {
  count: number;
  concurrency: number;
  rounds: number;
  warmUp: number;
  cost?: () => number;
};

/**
 * Runs `a` and `b` in turn, `rounds` rounds of `count / rounds` operations each after a warm-up of
 * `warmUp` operations each, so that drift on a noisy machine hits both alike; returns the summary
 * of each over all its rounds. With `cost` (a growing counter, e.g. a process's CPU ms), each
 * summary also has how much it grew per operation of that side.
 */
export async function alternate(
  a: Operation,
  b: Operation,
  options: AlternateOptions,
): Promise<readonly [Summary, Summary]> {
  const [first, second] = await alternateEach([a, b], options);
  return [first as Summary, second as Summary];
}

/** {@link alternate} with any number of sides, run in turn in the order given. */
export async function alternateEach(
  operations: readonly Operation[],
  options: AlternateOptions,
): Promise<Summary[]> {
  const { count, concurrency, rounds, warmUp, cost } = options;
  for (const operation of operations) await measure(warmUp, concurrency, operation);
  const runs = operations.map((): Measurement[] => []);
  const costs = operations.map(() => 0);
  for (let round = 0; round < rounds; round++) {
    for (const [side, operation] of operations.entries()) {
      const before = cost?.() ?? 0;
      runs[side]?.push(await measure(Math.round(count / rounds), concurrency, operation));
      costs[side] = (costs[side] ?? 0) + (cost?.() ?? 0) - before;
    }
  }
  return runs.map((sideRuns, side) => {
    const combined = combine(sideRuns);
    return {
      ...summarise(combined),
      ...(cost === undefined ? {} : { costPerOp: (costs[side] ?? NaN) / combined.ops }),
    };
  });
}

/**
 * Runs `a` and `b` interleaved, call by call: each of `concurrency` workers takes the next index
 * and calls both with it, `a` first on even indexes and `b` first on odd ones, so that the two see
 * the same inputs (an operation derives what it does from the index), the same moments of a noisy
 * machine and, in turn, the first and the second place of a pair (a cache the first warms
 * serves the second). `warmUp` pairs run first and are not counted. Returns the summary of each;
 * their `opsPerSecond` is the pairs' rate (the two share the time).
 */
export async function interleave(
  a: (worker: number, index: number) => Promise<unknown>,
  b: (worker: number, index: number) => Promise<unknown>,
  options: { count: number; concurrency: number; warmUp: number },
): Promise<readonly [Summary, Summary]> {
  const { count, concurrency, warmUp } = options;
  const run = async (pairs: number, offset: number, latencies: [number[], number[]]) => {
    let next = 0;
    const started = performance.now();
    await Promise.all(
      Array.from({ length: concurrency }, async (_, worker) => {
        while (next < pairs) {
          const index = offset + next++;
          const order: readonly (0 | 1)[] = index % 2 === 0 ? [0, 1] : [1, 0];
          for (const side of order) {
            const begin = performance.now();
            await (side === 0 ? a : b)(worker, index);
            latencies[side].push(performance.now() - begin);
          }
        }
      }),
    );
    return (performance.now() - started) / 1000;
  };
  await run(warmUp, 0, [[], []]);
  const latencies: [number[], number[]] = [[], []];
  const seconds = await run(count, warmUp, latencies);
  return [
    summarise({ ops: count, seconds, latenciesMs: latencies[0] }),
    summarise({ ops: count, seconds, latenciesMs: latencies[1] }),
  ];
}

/** Table cells of a raw-against-API comparison: ops/s and p50 / p99 of each, then the ratio. */
export function ratioCells(raw: Summary, api: Summary): string[] {
  return [
    fixed(raw.opsPerSecond, 0),
    `${fixed(raw.p50Ms)} / ${fixed(raw.p99Ms)}`,
    fixed(api.opsPerSecond, 0),
    `${fixed(api.p50Ms)} / ${fixed(api.p99Ms)}`,
    `**${fixed(api.opsPerSecond / raw.opsPerSecond, 2)}×**`,
  ];
}
