export type { CairnCheckpointSaverOptions } from './cairnCheckpointSaver';
export { CairnCheckpointSaver } from './cairnCheckpointSaver';
export { decodeName, encodeName, MAX_THREAD_NAME_LENGTH, ThreadNames } from './threadNames';
