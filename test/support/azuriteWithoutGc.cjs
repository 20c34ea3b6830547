/**
 * Loaded into the test run's Azurites before Azurite itself (`node -r`, test/support/globalSetup.ts):
 * turns off the blob service's garbage collection after its first sweep, at start-up. Azurite
 * sweeps the data of deleted blobs every 10 minutes on its one thread and answers nothing while it
 * does: after a few thousand blocks staged and deleted, as the suite does, a sweep stalled every
 * request for 8 to 27 s on a loaded two-core machine, long enough for the storage deadlines of
 * whatever tests ran then to expire. These Azurites keep their data in memory for one run, so
 * nothing needs collecting; the interval becomes the longest a Node timer takes (about 24 days).
 */
// A CommonJS module of Azurite's, changed in place before Azurite reads it. Plain JavaScript, so
// that the setup can load it without a build.
'use strict';
const constants = require('azurite/dist/src/blob/utils/constants');

if (typeof constants.DEFAULT_GC_INTERVAL_MS !== 'number') {
  // A newer Azurite moved it: fail loudly rather than run the suite with the stalls back.
  throw new Error('azurite/dist/src/blob/utils/constants has no DEFAULT_GC_INTERVAL_MS any more');
}
constants.DEFAULT_GC_INTERVAL_MS = 2 ** 31 - 1;
