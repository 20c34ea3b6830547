import { CairnHttpError, type HttpReply, segment, Transport, type TransportOptions } from '../transport';

/**
 * The snapshot routes of Cairn's HTTP API (docs/snapshots.md), one method each. Error answers
 * become {@link CairnHttpError}, except the outcomes a caller acts on: an absent snapshot (null),
 * a stale parent ({@link StaleParentError}) and missing parts ({@link MissingPartsError}).
 */

export interface StoredSnapshotJson {
  readonly id: string;
  readonly workspaceId: string;
  /** The exact manifest bytes. */
  readonly manifest: Buffer;
  readonly signature: Buffer;
}

export interface SnapshotSummaryJson {
  readonly id: string;
  readonly publishedAt: string;
  readonly manifestBytes: number;
}

export interface DeleteReportJson {
  readonly id: string;
  readonly latest: string | null;
  readonly objectsDeleted: number;
  readonly collectionComplete: boolean;
}

/** The workspace's `latest` moved on since the parent the publisher named. */
export class StaleParentError extends Error {
  constructor(readonly latest: string | null) {
    super(
      `another snapshot (${latest ?? 'none'}) became the workspace's latest meanwhile, so this one is not the latest: save again`,
    );
    this.name = 'StaleParentError';
  }
}

/** The service lacks parts a manifest references (`<sha256>/<part>`, the first 1,000). */
export class MissingPartsError extends Error {
  constructor(
    readonly missing: readonly string[],
    readonly missingCount: number,
  ) {
    super(`${missingCount} part(s) are not stored`);
    this.name = 'MissingPartsError';
  }
}

export class SnapshotApi {
  readonly transport: Transport;

  constructor(options: TransportOptions | Transport) {
    this.transport = options instanceof Transport ? options : new Transport(options);
  }

  /** Uploads one part; true when it was stored now, false when the same bytes were stored already. */
  async putPart(workspaceId: string, sha256: string, part: number, bytes: Buffer): Promise<boolean> {
    const reply = await this.transport.send('PUT', `${partsRoute(workspaceId)}/${sha256}/${part}`, bytes);
    if (reply.status === 201 || reply.status === 200) {
      await reply.discard();
      return reply.status === 201;
    }
    return Transport.fail(reply);
  }

  /** The bytes of one part; null when it is not stored. */
  async getPart(workspaceId: string, sha256: string, part: number): Promise<Buffer | null> {
    const reply = await this.transport.send('GET', `${partsRoute(workspaceId)}/${sha256}/${part}`);
    if (reply.status === 404) {
      await reply.discard();
      return null;
    }
    if (reply.status !== 200) return Transport.fail(reply);
    const chunks: Buffer[] = [];
    for await (const chunk of reply.body) chunks.push(Buffer.from(chunk));
    return Buffer.concat(chunks);
  }

  /** The stored size of one part; null when it is not stored. */
  async headPart(workspaceId: string, sha256: string, part: number): Promise<number | null> {
    const reply = await this.transport.send('HEAD', `${partsRoute(workspaceId)}/${sha256}/${part}`);
    await reply.discard();
    if (reply.status === 404) return null;
    if (reply.status !== 200)
      throw new CairnHttpError(reply.status, 'unknown', `HEAD of a part: HTTP ${reply.status}`);
    return Number(reply.header('content-length'));
  }

  async publish(
    workspaceId: string,
    request: { manifest: Buffer; signature: Buffer; parent: string | null; allowExternalSymlinks: boolean },
  ): Promise<{ id: string; latest: string }> {
    const body = JSON.stringify({
      manifest: request.manifest.toString('base64'),
      signature: request.signature.toString('base64'),
      parent: request.parent,
      allowExternalSymlinks: request.allowExternalSymlinks,
    });
    const reply = await this.transport.send('POST', snapshotsRoute(workspaceId), body);
    if (reply.status === 201) return (await reply.json()) as { id: string; latest: string };
    const error = await Transport.fail(reply).catch((e: unknown) => e);
    if (error instanceof CairnHttpError && error.status === 409 && 'latest' in error.details) {
      throw new StaleParentError((error.details['latest'] as string | null) ?? null);
    }
    if (error instanceof CairnHttpError && error.status === 422) {
      const missing = (error.details['missing'] as string[] | undefined) ?? [];
      throw new MissingPartsError(missing, Number(error.details['missingCount'] ?? missing.length));
    }
    throw error;
  }

  /** A snapshot of the workspace (`latest` for its latest); null when there is none. */
  async read(workspaceId: string, idOrLatest: string): Promise<StoredSnapshotJson | null> {
    return this.snapshotAt(`${snapshotsRoute(workspaceId)}/${segment(idOrLatest)}`);
  }

  /** A snapshot of any of the caller's workspaces, by id; null when there is none. */
  async find(id: string): Promise<StoredSnapshotJson | null> {
    return this.snapshotAt(`/snapshots/${segment(id)}`);
  }

  /** Every snapshot of the workspace, newest first, page after page. */
  async list(workspaceId: string): Promise<{ snapshots: SnapshotSummaryJson[]; latest: string | null }> {
    const snapshots: SnapshotSummaryJson[] = [];
    let latest: string | null;
    let cursor: string | null = null;
    do {
      const query: string =
        cursor === null ? '?limit=1000' : `?limit=1000&cursor=${encodeURIComponent(cursor)}`;
      const reply = await this.transport.send('GET', `${snapshotsRoute(workspaceId)}${query}`);
      if (reply.status !== 200) return Transport.fail(reply);
      const page = (await reply.json()) as {
        snapshots: SnapshotSummaryJson[];
        latest: string | null;
        next: string | null;
      };
      snapshots.push(...page.snapshots);
      latest = page.latest;
      cursor = page.next;
    } while (cursor !== null);
    return { snapshots, latest };
  }

  async delete(workspaceId: string, id: string): Promise<DeleteReportJson> {
    const reply = await this.transport.send('DELETE', `${snapshotsRoute(workspaceId)}/${segment(id)}`);
    if (reply.status !== 200) return Transport.fail(reply);
    return (await reply.json()) as DeleteReportJson;
  }

  private async snapshotAt(route: string): Promise<StoredSnapshotJson | null> {
    const reply: HttpReply = await this.transport.send('GET', route);
    if (reply.status === 404) {
      await reply.discard();
      return null;
    }
    if (reply.status !== 200) return Transport.fail(reply);
    const body = (await reply.json()) as {
      id: string;
      workspaceId: string;
      manifest: string;
      signature: string;
    };
    return {
      id: body.id,
      workspaceId: body.workspaceId,
      manifest: Buffer.from(body.manifest, 'base64'),
      signature: Buffer.from(body.signature, 'base64'),
    };
  }
}

function snapshotsRoute(workspaceId: string): string {
  return `/workspaces/${segment(workspaceId)}/snapshots`;
}

function partsRoute(workspaceId: string): string {
  return `${snapshotsRoute(workspaceId)}/objects`;
}
