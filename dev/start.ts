/**
 * `npm start`: the whole service on this machine with nothing else installed.
 *
 * 0. Before anything starts (dev/preflight.ts): PORT, the lock file `.cairn/npm-start.lock` (one
 *    `npm start` per folder), that PORT is free, and every setting; each refusal is one line.
 *    `dev/launch.mjs` (the `start` script) runs that check with the built code, then builds what
 *    changed, then {@link main}.
 * 1. Reads `local.settings.json` (its `Values`) when present, as `func start` does; the environment wins.
 * 2. Starts Azurite from node_modules, data under `.cairn/azurite`, loopback only, on the standard
 *    ports when they are free. A setting that names another emulator (a loopback or Azurite
 *    endpoint other than this one's) is refused, naming it: empty means this Azurite.
 * 3. Without CAIRN_API_KEYS (and no Entra ID settings), makes a development key for tenant `dev`
 *    (admin), keeps it in `.cairn/dev-api-key` (mode 600) and prints it once, when it is created.
 * 4. With only CAIRN_BLOB_CONTAINER set, points the Blob backend at this Azurite; without
 *    CAIRN_QUEUE_ENDPOINT, puts the email-window queue on this Azurite too.
 * 5. Runs `func start` when Azure Functions Core Tools are installed, else the local runtime, whose
 *    own endpoints (durable webhooks, `/admin/functions/<name>`) need the host key: kept in
 *    `.cairn/host-key` (mode 600), printed once, when it is created.
 * Ctrl-C stops everything it started.
 */
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

import { sha256Hex } from '../shared/auth';
import { startAzurite } from './azurite';
import { HOST_KEY_FILE, loadOrCreateHostKey } from './host/hostAccess';
import { serve, stopOnSignals } from './host/serve';
import {
  assertPortFree,
  checkSettings,
  fillEmbeddedSettings,
  foreignEmulatorSetting,
  parsePort,
  refuseStart,
  type StartLock,
  StartRefusal,
  takeStartLock,
} from './preflight';

// npm runs scripts from the project folder: .cairn/ and local.settings.json are looked up there.
const projectRoot = process.cwd();
const stateDir = path.join(projectRoot, '.cairn');

function loadLocalSettings(): void {
  const file = path.join(projectRoot, 'local.settings.json');
  if (!existsSync(file)) return;
  let settings: { Values?: Record<string, unknown> };
  try {
    settings = JSON.parse(readFileSync(file, 'utf8')) as { Values?: Record<string, unknown> };
  } catch (error) {
    throw new StartRefusal(`local.settings.json is not valid JSON (${(error as Error).message})`);
  }
  for (const [name, value] of Object.entries(settings.Values ?? {})) {
    if (typeof value !== 'string') {
      throw new StartRefusal(`local.settings.json: Values.${name} must be a string`);
    }
    if (process.env[name] === undefined) process.env[name] = value;
  }
}

/** The development key, created on first use; returns it and whether it was just created. */
function developmentKey(): { key: string; created: boolean } {
  const file = path.join(stateDir, 'dev-api-key');
  if (existsSync(file)) return { key: readFileSync(file, 'utf8').trim(), created: false };
  const key = `cairn_dev_${randomBytes(24).toString('base64url')}`;
  writeFileSync(file, key + '\n', { mode: 0o600 });
  return { key, created: true };
}

/**
 * Azurite on its standard ports (10000-10002, what `UseDevelopmentStorage=true` and the sample
 * settings expect) when they are free, else on free ports (handed to the app through the env).
 */
async function startEmbeddedAzurite() {
  const location = path.join(stateDir, 'azurite');
  try {
    return await startAzurite({ location, ports: { blob: 10000, queue: 10001, table: 10002 } });
  } catch {
    return startAzurite({ location });
  }
}

function funcAvailable(): boolean {
  return spawnSync('func', ['--version'], { stdio: 'ignore' }).status === 0;
}

export interface Prepared {
  readonly port: number;
  readonly lock: StartLock;
}

/** Everything checked before anything starts; throws a one-line {@link StartRefusal} or a setting's error. */
export async function prepare(): Promise<Prepared> {
  loadLocalSettings();
  const port = parsePort(process.env['PORT']);
  mkdirSync(stateDir, { recursive: true });
  const lock = takeStartLock(stateDir, port);
  await assertPortFree(port);
  checkSettings(process.env, projectRoot);
  return { port, lock };
}

export async function main({ port, lock }: Prepared): Promise<void> {
  let azurite;
  try {
    azurite = await startEmbeddedAzurite();
  } catch (error) {
    throw new StartRefusal(`Azurite did not start: ${(error as Error).message.split('\n')[0]}`);
  }
  const foreign = foreignEmulatorSetting(process.env, azurite);
  if (foreign !== undefined) {
    await azurite.stop();
    throw new StartRefusal(
      `${foreign.setting} names ${foreign.value}, an emulator npm start did not start (its own Azurite is at ${azurite.blobEndpoint}): leave ${foreign.setting} empty to use npm start's Azurite`,
    );
  }
  process.env['AzureWebJobsStorage'] = azurite.connectionString;
  process.env['FUNCTIONS_WORKER_RUNTIME'] ??= 'node';
  for (const [name, value] of Object.entries(fillEmbeddedSettings(process.env, projectRoot, azurite))) {
    if (value !== undefined) process.env[name] = value;
  }
  if (!process.env['CAIRN_QUEUE_ENDPOINT']) {
    console.log('CAIRN_QUEUE_ENDPOINT is not set: the emailWindowPoll timer will not enqueue email windows.');
  }

  let keyText: string | undefined;
  if (!process.env['CAIRN_API_KEYS'] && !process.env['CAIRN_AUTH_ISSUER']) {
    const { key, created } = developmentKey();
    process.env['CAIRN_API_KEYS'] = `dev:${sha256Hex(key)}:admin`;
    // Printed once, when created; later starts refer to the file instead.
    keyText = created ? key : '$(cat .cairn/dev-api-key)';
    if (created) {
      console.log(
        `Created a development API key for tenant "dev" (admin), kept in .cairn/dev-api-key:\n  ${key}\n`,
      );
    }
  }
  const example = (baseUrl: string) =>
    keyText === undefined
      ? ''
      : `Try:\n  curl -X PUT -H "Authorization: Bearer ${keyText}" --data-binary 'hello' ${baseUrl}/api/kv/notes/first\n` +
        `  curl -H "Authorization: Bearer ${keyText}" ${baseUrl}/api/kv/notes/first\n`;
  console.log(
    `Azurite: blob ${azurite.blobEndpoint}, queue ${azurite.queueEndpoint}, table ${azurite.tableEndpoint}`,
  );

  if (funcAvailable() && process.env['CAIRN_LOCAL_RUNTIME'] !== '1') {
    console.log(`Starting the Functions host (func start) on port ${port}`);
    console.log(example(`http://127.0.0.1:${port}`));
    const child = spawn('func', ['start', '--port', String(port)], {
      cwd: projectRoot,
      stdio: 'inherit',
      env: process.env,
    });
    const stop = () => child.kill('SIGINT');
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
    child.once('exit', (code) => void azurite.stop().finally(() => process.exit(code ?? 0)));
    return;
  }

  const hostKey = loadOrCreateHostKey(stateDir);
  if (hostKey.created) {
    // Printed once, when created, as the development API key; later starts refer to the file.
    console.log(
      `Created the local runtime's host key (for /admin/functions/... and the durable webhooks), kept in .cairn/${HOST_KEY_FILE}:\n  ${hostKey.key}\n`,
    );
  }
  let runtime;
  try {
    runtime = await serve(port, hostKey.key);
  } catch {
    // serve() printed the one line.
    await azurite.stop();
    process.exit(1);
  }
  lock.update(runtime.port);
  // One write, so that whoever waits for the first line also gets the example.
  console.log(
    `Cairn is listening on ${runtime.url}/api (local runtime; Ctrl-C stops it)\n${example(runtime.url)}`,
  );
  stopOnSignals(runtime, () => azurite.stop());
}

if (require.main === module) {
  prepare().then(main).catch(refuseStart);
}
