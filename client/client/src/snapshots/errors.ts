/**
 * The outcomes of a snapshot publish that a caller acts on, thrown instead of a `CairnHttpError`:
 * another snapshot became the workspace's latest (409 `conflict` with `latest`), or parts the
 * manifest references are not stored (422 `missing_objects`).
 */

/** The workspace's `latest` moved on since the parent the publisher named: save (or publish) again on it. */
export class StaleParentError extends Error {
  override readonly name = 'StaleParentError';

  constructor(readonly latest: string | null) {
    super(
      `another snapshot (${latest ?? 'none'}) became the workspace's latest meanwhile, so this one is not the latest: save again`,
    );
  }
}

/** The service lacks parts a manifest references (`<sha256>/<part>`, the first 1,000). */
export class MissingPartsError extends Error {
  override readonly name = 'MissingPartsError';

  constructor(
    readonly missing: readonly string[],
    readonly missingCount: number,
  ) {
    super(`${missingCount} part(s) are not stored`);
  }
}
