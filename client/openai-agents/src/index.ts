export type { CairnSessionOptions } from './cairnSession.js';
export {
  CairnSession,
  encodeSessionId,
  HistoryTransactionError,
  SESSION_KEY_PREFIX,
} from './cairnSession.js';
export { CairnAgentsMemory } from './memory.js';
