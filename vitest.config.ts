import path from 'node:path';

import { defineConfig } from 'vitest/config';

export default defineConfig({
  // The `#shared/*` imports of functions/ (package.json `imports`) as sources, as tsconfig's paths read them.
  resolve: { alias: [{ find: /^#shared\/(.*)$/, replacement: path.resolve('shared/$1') }] },
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/support/globalSetup.ts'],
    setupFiles: ['test/support/setup.ts', 'test/support/contractHooks.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Two cores: keep the Azurite-heavy files from starving each other.
    maxWorkers: 2,
  },
});
