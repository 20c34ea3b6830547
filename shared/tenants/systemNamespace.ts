/**
 * The key/value namespace Cairn keeps its own records in (the email-poll registry, trusted snapshot
 * keys, the tenant directory, retention policies and prune state). It can never be a tenant id
 * (tenant ids are `[A-Za-z0-9._-]`), so no caller reaches it through the API. Locally it is the
 * folder `<CAIRN_DATA_DIR>/kv/@cairn/`; on Blob, the container of that name's hash.
 */
export const SYSTEM_NAMESPACE = '@cairn';
