/**
 * The app's entry point (package.json `main`): loads every function registration, then reads the
 * configuration so that a missing or invalid setting stops the app at start-up, naming it.
 */
import './coordination';
import './emailWindowPoll';
import './health';
import './kv';
import './memory';
import './migrations';
import './notFound';
import './openapi';
import './retention';
import './sessions';
import './snapshots';
import './threads';

import { getServices } from '../shared/services';

getServices();
