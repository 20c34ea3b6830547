export type { CairnStoreOptions, CairnStoreScope } from './store';
export { CairnStore, decodeName, encodeName } from './store';
