// The rule is the protocol's (shared/protocol/text.ts), where the route specs check it as well.
export { CONTROL_CHARACTER, hasControlCharacter } from './text.js';
