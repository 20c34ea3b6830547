/**
 * The C0 control characters and DEL, which no name, key, id or label the service stores may
 * contain (they break logs, terminals and the line-based formats that show them). Not global, so
 * `test` keeps no state between calls.
 */
// eslint-disable-next-line no-control-regex
export const CONTROL_CHARACTER = /[\u0000-\u001f\u007f]/;

/** Whether `text` contains a {@link CONTROL_CHARACTER}. */
export function hasControlCharacter(text: string): boolean {
  return CONTROL_CHARACTER.test(text);
}
