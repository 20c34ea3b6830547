export type { CairnSessionOptions } from './cairnSession';
export { CairnSession, encodeSessionId, HistoryTransactionError, SESSION_KEY_PREFIX } from './cairnSession';
export { CairnAgentsMemory } from './memory';
