export type { CairnCheckpointSaverOptions } from './cairnCheckpointSaver';
export { CairnCheckpointSaver } from './cairnCheckpointSaver';
export type { GraphMemoryConfig } from './memory';
export { CairnGraphMemory } from './memory';
export type { CairnStoreOptions, CairnStoreScope } from './store';
export { CairnStore, decodeName as decodeStoreLabel, encodeName as encodeStoreLabel } from './store';
export { decodeName, encodeName, MAX_THREAD_NAME_LENGTH, ThreadNames } from './threadNames';
