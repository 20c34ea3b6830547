/**
 * `npm run bench -- --quick`: every bench with small counts, a smoke check that each still runs
 * end to end (its figures mean nothing and are never recorded). Read from the command line when
 * this module loads, so that the benches' counts can stay module constants.
 */
export const QUICK = process.argv.slice(2).includes('--quick');

/** `full` in a real run, `quick` under `--quick`. */
export function sized(full: number, quick: number): number {
  return QUICK ? quick : full;
}
