/** `npm run docs`: writes the documentation pages that are rendered from code. */
import { writeFileSync } from 'node:fs';
import path from 'node:path';

import { renderConfigurationDoc } from './configurationDoc';

writeFileSync(path.resolve('docs/configuration.md'), renderConfigurationDoc());
console.log('wrote docs/configuration.md');
