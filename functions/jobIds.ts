/**
 * Whether `id` can name a durable job (a migration or a rewrap): the durable client makes ids of
 * letters, digits, `-` and `_` (hex GUIDs). The client puts an id into the URL of its status request
 * as it is, so an id with `/`, `.`, `%`, `?` or `#` would name another URL (or none): such an id is
 * answered as an unknown job (404) and never sent.
 */
export function isJobId(id: string): boolean {
  return /^[A-Za-z0-9_-]{1,128}$/.test(id);
}
