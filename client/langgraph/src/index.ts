export type { CairnCheckpointSaverOptions } from './cairnCheckpointSaver.js';
export { CairnCheckpointSaver } from './cairnCheckpointSaver.js';
export type { GraphMemoryConfig } from './memory.js';
export { CairnGraphMemory } from './memory.js';
export type { CairnStoreOptions, CairnStoreScope } from './store.js';
export { CairnStore, decodeName as decodeStoreLabel, encodeName as encodeStoreLabel } from './store.js';
export { decodeName, encodeName, MAX_THREAD_NAME_LENGTH, ThreadNames } from './threadNames.js';
