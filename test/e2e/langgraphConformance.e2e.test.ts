import { randomUUID } from 'node:crypto';

import { CairnClient } from '@cairn-state/client';
import { CairnCheckpointSaver } from '@cairn-state/langgraph';
import {
  type CheckpointSaverTestInitializer,
  deltaChannelHistoryTests,
  validate,
} from '@langchain/langgraph-checkpoint-validation';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';

import {
  apiKeysSetting,
  type Backend,
  backendSettings,
  newTenant,
  type RunningApp,
  startApp,
} from '../support/app';
import { azurite } from '../support/azurite';
import { scaled } from '../support/timeouts';

/**
 * LangGraph's own conformance suite for checkpointers (`@langchain/langgraph-checkpoint-validation`,
 * the suite every official saver runs) against `CairnCheckpointSaver` and the real app over HTTP,
 * on both backends, none of its tests skipped, with its opt-in part on `getDeltaChannelHistory`.
 * Each saver the suite asks for gets a scope of its own, so the suite's fixed thread ids ("1",
 * "thread-1") of one part never meet another part's.
 */

// The suite is written against vitest's globals; this project imports them instead.
Object.assign(globalThis, { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it });

describe.each<Backend>(['local', 'blob'])('LangGraph conformance on the %s backend', (backend) => {
  const tenant = newTenant('conformance');
  let app: RunningApp | undefined;
  let client: CairnClient;

  const initializer: CheckpointSaverTestInitializer<CairnCheckpointSaver> = {
    checkpointerName: `CairnCheckpointSaver (${backend})`,
    beforeAllTimeout: scaled(60_000),
    async beforeAll() {
      app = await startApp({
        CAIRN_API_KEYS: apiKeysSetting([tenant]),
        ...backendSettings(backend, azurite().blobEndpoint),
      });
      client = new CairnClient({ url: `${app.url}/api`, token: tenant.key });
    },
    async afterAll() {
      await app?.stop();
    },
    createCheckpointer: () => new CairnCheckpointSaver({ client, scope: `suite-${randomUUID()}` }),
    // Everything a saver wrote is in its scope's threads: deleting them leaves nothing behind.
    async destroyCheckpointer(saver) {
      const prefix = saver.threadName('x').slice(0, -1);
      for await (const name of client.threads.list({ prefix })) await client.threads.delete(name);
      expect(await client.threads.listPage({ prefix })).toEqual({ threads: [], next: null });
    },
  };
  validate(initializer);
  // Opt-in in the suite (the method is beta): the walk a DeltaChannel is rebuilt from.
  deltaChannelHistoryTests(initializer);
});
