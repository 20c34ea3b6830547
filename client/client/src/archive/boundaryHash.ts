import { createHash, type Hash } from 'node:crypto';

/** SHA-256 of a stream of bytes that also remembers the digest of its first `boundary` bytes. */
export class BoundaryHash {
  private readonly hash: Hash = createHash('sha256');
  private seen = 0;
  private prefix: string | undefined;

  constructor(private readonly boundary: number) {
    if (boundary === 0) this.prefix = createHash('sha256').digest('hex');
  }

  update(bytes: Uint8Array): void {
    if (this.prefix === undefined && this.seen + bytes.length >= this.boundary) {
      const head = this.boundary - this.seen;
      this.hash.update(bytes.subarray(0, head));
      this.prefix = this.hash.copy().digest('hex');
      this.hash.update(bytes.subarray(head));
    } else {
      this.hash.update(bytes);
    }
    this.seen += bytes.length;
  }

  digestSoFar(): string {
    return this.hash.copy().digest('hex');
  }

  prefixDigest(): string {
    return this.prefix ?? '';
  }

  digest(): string {
    return this.hash.digest('hex');
  }
}
