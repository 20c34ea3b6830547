#!/usr/bin/env node
import process from 'node:process';

import { runCairn } from './main.js';

void runCairn(process.argv.slice(2), process.env, process).then((code) => {
  // Exit once stdout is flushed: a piped report must arrive whole.
  process.stdout.write('', () => process.exit(code));
});
