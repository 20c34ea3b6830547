import { afterAll } from 'vitest';

import { cleanUp } from './cleanup';

// After each test file, also a failed one: stop what it started and remove its temporary folders.
afterAll(cleanUp);
