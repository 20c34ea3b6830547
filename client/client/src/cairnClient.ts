import { ArchiveClient, type ArchiveClientOptions } from './archiveClient.js';
import { AuditClient } from './auditClient.js';
import { CoordinationClient } from './coordinationClient.js';
import { EncryptionClient } from './encryptionClient.js';
import { KeyValueClient } from './keyValueClient.js';
import { MemoryClient } from './memoryClient.js';
import { MigrationsClient } from './migrationsClient.js';
import { RetentionClient } from './retentionClient.js';
import { SnapshotsClient } from './snapshotsClient.js';
import { ThreadsClient } from './threadsClient.js';
import { nodeHttpSender, readJson, Transport } from './transport.js';

/**
 * A client of every route of a Cairn service, one property per route family, all sharing one pool
 * of keep-alive sockets, one retry rule and one timeout:
 *
 *     const cairn = new CairnClient({ url: 'http://127.0.0.1:7071/api', token: apiKey });
 *     const { etag } = await cairn.kv.put('notes/today.md', '# today');
 *     await cairn.kv.put('notes/today.md', '# today, later', { ifMatch: etag });
 */

/** Where the service is and who calls it; the rest tunes retries, timeouts and archive transfers. */
export type CairnClientOptions = ArchiveClientOptions;

export interface Health {
  readonly status: 'ok';
  readonly backend: 'local' | 'blob';
  readonly version: string;
}

export class CairnClient {
  /** The tenant's key/value space with compare-and-swap. */
  readonly kv: KeyValueClient;
  /** Session archives: publish and restore checkpoints, read manifests, list sessions. */
  readonly sessions: ArchiveClient;
  /** Email cursor, watched chats, chat cursors and claims, promises, interaction log. */
  readonly coordination: CoordinationClient;
  /** Long-term memory: facts under namespaces, with search. */
  readonly memory: MemoryClient;
  /** Local-to-blob migrations (admin). */
  readonly migrations: MigrationsClient;
  /** Retention policies, prune now, verify and the tenant directory (admin). */
  readonly retention: RetentionClient;
  /** Threads of delta checkpoints, pending writes, rewinds and runs that hold a thread. */
  readonly threads: ThreadsClient;
  /** Signed workspace snapshots: save, load and verify folders; parts, publish, list, delete, trusted keys. */
  readonly snapshots: SnapshotsClient;
  /** Encryption at rest: the rewrap job (admin). */
  readonly encryption: EncryptionClient;
  /** The tenant's audit trail: records, verification, signed heads. */
  readonly audit: AuditClient;
  private readonly transport: Transport;

  constructor(options: CairnClientOptions) {
    const shared = { ...options, send: options.send ?? nodeHttpSender() };
    this.transport = new Transport(shared);
    this.kv = new KeyValueClient(this.transport);
    // Its own transport on the same sockets, so that its publish reports count its own requests.
    this.sessions = new ArchiveClient(shared);
    this.coordination = new CoordinationClient(this.transport);
    this.memory = new MemoryClient(this.transport);
    this.migrations = new MigrationsClient(this.transport);
    this.retention = new RetentionClient(this.transport);
    this.threads = new ThreadsClient(this.transport);
    // Its own transport on the same sockets too, so that a save's report counts its own requests.
    this.snapshots = new SnapshotsClient(shared);
    this.encryption = new EncryptionClient(this.transport);
    this.audit = new AuditClient(this.transport);
  }

  /** Liveness and the backend kind; needs no credential. */
  async health(): Promise<Health> {
    return readJson(await this.transport.call('GET', '/health'), 200);
  }
}
