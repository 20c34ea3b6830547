/** The tags of the OpenAPI document's operations, by domain. */
export const TAGS = {
  service: 'service',
  kv: 'key/value',
  sessions: 'session archives',
  coordination: 'fleet coordination',
  threads: 'threads',
  snapshots: 'workspace snapshots',
  memory: 'memory',
  migrations: 'migrations',
  encryption: 'encryption',
  audit: 'audit',
  retention: 'retention',
  mcp: 'mcp',
} as const;
