import v8 from 'node:v8';

/**
 * Sets how far V8 lets the JavaScript heap grow past what its last full collection kept alive
 * (CAIRN_HEAP_GROWING_PERCENT), for the whole process, from now on. By default V8 picks that
 * factor itself, and when collections are cheap next to the work between them (an instance
 * answering requests) it lets the heap grow to several times what is alive: garbage an instance
 * never uses again, but memory the instance holds all the same. A fixed factor keeps the peak near
 * the live set, at the cost of more frequent (incremental, concurrent) collections; the memory and
 * threads benchmarks run with it (docs/benchmark-results.md). This is not a limit: the heap grows as
 * far as what is alive needs. `0` leaves V8's own heuristics, and any flag the host passes, alone.
 *
 * The flag is read by V8 at every full collection, so setting it once the process runs takes
 * effect at the next one; it is set where the app is loaded (functions/index.ts), which is the
 * same in the Functions worker and in the local runtime.
 */
export function applyHeapGrowth(
  percent: number,
  setFlags: (flags: string) => void = v8.setFlagsFromString,
): void {
  if (percent > 0) setFlags(`--heap-growing-percent=${percent}`);
}
