/**
 * The seam of encryption at rest: every stored value that may be encrypted goes through a
 * {@link ValueCodec} on its way to storage and back. The default codec stores the bytes as they are.
 *
 * A codec MUST bind the stored bytes to their place: bytes sealed for one place (tenant, kind, key,
 * version) MUST fail to open at another (an {@link IntegrityError}, never other plaintext), and a
 * codec configured to encrypt MUST refuse stored bytes that are not sealed (plain text where
 * ciphertext is expected is tampering, not an old format to accept).
 */

/** Where a value is stored: what its sealed bytes are bound to. */
export interface ValuePlace {
  readonly tenant: string;
  /** What the value is, e.g. `thread.value`, `thread.writes`, `thread.record`, `memory.fact`, `kv`. */
  readonly kind: string;
  /** The value's key within its kind (a storage key, or namespace and key joined). */
  readonly key: string;
  /** A version the value is bound to when it has one (a channel version, a checkpoint id). */
  readonly version?: string;
}

export interface ValueCodec {
  /** False for the plain codec: stored bytes are the values themselves. */
  readonly encrypts: boolean;
  /** The bytes to store for `plain` at `place`. */
  seal(plain: Buffer, place: ValuePlace): Buffer;
  /** The plain bytes of `stored` at `place`; throws IntegrityError when they do not open there. */
  open(stored: Buffer, place: ValuePlace): Buffer;
  /**
   * Resolves once `tenant` may have values sealed and opened: the process's key check has passed
   * and, when keys are configured, the tenant is recorded as holding sealed values (so that the
   * `rewrap` job finds it). Call it before the first `seal` for a tenant; cheap after the first
   * call (remembered per process). Rejects when the keys cannot be used (fail closed).
   * Absent on a codec that needs no preparation.
   */
  prepare?(tenant: string): Promise<void>;
}

/** Stores values as they are (no encryption keys configured). */
export const plainCodec: ValueCodec = {
  encrypts: false,
  seal: (plain) => plain,
  open: (stored) => stored,
};
