/**
 * The app's entry point (package.json `main`): loads every function registration, then reads the
 * configuration so that a missing or invalid setting stops the app at start-up, naming it. The
 * checks that need the storage run in the app-start hook (see {@link startupChecks}). The heap's
 * growth is set here, once, for the process (shared/heapGrowth.ts).
 */
import './audit';
import './auditJobs';
import './coordination';
import './emailWindowPoll';
import './health';
import './kv';
import './mcp';
import './memory';
import './migrations';
import './notFound';
import './openapi';
import './rewrap';
import './retention';
import './sessions';
import './snapshots';
import './threads';

import { app } from '@azure/functions';

import { applyHeapGrowth } from '#shared/heapGrowth';
import { getServices } from '#shared/services';

import { startupChecks } from './startup';

applyHeapGrowth(getServices().config.heapGrowingPercent);
app.hook.appStart(startupChecks);
