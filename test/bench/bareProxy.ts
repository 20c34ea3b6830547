/**
 * The floor of a `get` over HTTP, for `npm run bench -- memory`: a process of its own, as the app
 * is, serving `GET /?partition=&row=` with one `getEntity` through a Table client built as the
 * app builds its own (`createTableClient`), and the entity as JSON. Nothing else: no routing,
 * authentication, validation or decoding, no log line. What it adds to the bench's own
 * `getEntity` is one HTTP hop between two Node processes on this machine.
 *
 * Environment: CAIRN_BENCH_TABLE_ENDPOINT and CAIRN_BENCH_TABLE (Azurite's account key). Prints
 * `{"url":"http://127.0.0.1:<port>"}` once it listens; SIGTERM ends it (Node's default).
 */
import http from 'node:http';

import { AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY } from '../../dev/azurite';
import { createTableClient } from '../../shared/storage/azure/clients';

const table = createTableClient(
  {
    endpoint: process.env['CAIRN_BENCH_TABLE_ENDPOINT'] ?? '',
    accountName: AZURITE_ACCOUNT,
    accountKey: AZURITE_ACCOUNT_KEY,
  },
  process.env['CAIRN_BENCH_TABLE'] ?? '',
);

const server = http.createServer((req, res) => {
  const query = new URL(req.url ?? '/', 'http://localhost').searchParams;
  table.getEntity(query.get('partition') ?? '', query.get('row') ?? '').then(
    (entity) => {
      // Int64 columns arrive as bigint, which JSON has no form for.
      const body = JSON.stringify(entity, (_key, value: unknown) =>
        typeof value === 'bigint' ? value.toString() : value,
      );
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
      res.end(body);
    },
    () => res.writeHead(502).end(),
  );
});
server.keepAliveTimeout = 65_000;
server.listen(0, '127.0.0.1', () => {
  const { port } = server.address() as { port: number };
  process.stdout.write(`${JSON.stringify({ url: `http://127.0.0.1:${port}` })}\n`);
});
