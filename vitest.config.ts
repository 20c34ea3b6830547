import path from 'node:path';

import { defineConfig } from 'vitest/config';

import { scaled } from './test/support/timeouts';

export default defineConfig({
  // The `#shared/*` imports of functions/ (package.json `imports`) and the packages' names as
  // sources, as tsconfig's paths read them: a test loads one copy of each module, the server's
  // protocol and the client's being the same. The packages as built are tested as installed
  // (test/e2e/packagesInstalled.e2e.test.ts). An import of the protocol's folder itself would
  // resolve through its package.json to the build: import `protocol/index`.
  resolve: {
    alias: [
      { find: /^#shared\/(.*)$/, replacement: path.resolve('shared/$1') },
      { find: /^@cairn-state\/protocol\/(.*)$/, replacement: path.resolve('shared/protocol/$1') },
      { find: /^@cairn-state\/protocol$/, replacement: path.resolve('shared/protocol/index.ts') },
      { find: /^@cairn-state\/cli$/, replacement: path.resolve('client/cli/src/main.ts') },
      {
        find: /^@cairn-state\/(client|langgraph|openai-agents)$/,
        replacement: path.resolve('client/$1/src/index.ts'),
      },
    ],
  },
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/support/globalSetup.ts'],
    setupFiles: ['test/support/setup.ts', 'test/support/contractHooks.ts'],
    // Bounds on a hang, not on speed: 60 s on a quiet machine, longer on a small or loaded one
    // (test/support/timeouts.ts: 180 s on two cores).
    testTimeout: scaled(60_000),
    hookTimeout: scaled(60_000),
    teardownTimeout: scaled(10_000),
    pool: 'forks',
    // Two cores: keep the Azurite-heavy files from starving each other.
    maxWorkers: 2,
  },
});
