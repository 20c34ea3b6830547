/**
 * The queue that receives claimed email windows (CAIRN_EMAIL_WINDOW_QUEUE).
 *
 * ## Message format (for consumers)
 *
 * The message text is the base64 of the UTF-8 JSON
 *
 *     {"tenant":"contoso","from":"2026-11-29T21:15:51.123Z","to":"2026-11-29T21:16:51.123Z","claimId":"9f0c…"}
 *
 * (base64 because it is the default `messageEncoding` of the Functions queue trigger, so a queue
 * triggered function receives the JSON object as is). The window is `from` (exclusive: the previous
 * window's `to`) to `to` (inclusive), RFC 3339 UTC; windows of one tenant are contiguous and never
 * overlap. `claimId` identifies the window: a consumer that keeps the claim ids it processed can
 * drop the one duplicate Cairn cannot rule out (see emailWindowPoll.ts: an enqueue whose outcome
 * is unknown is repeated once its lease expires). Messages never expire (time-to-live -1).
 */
export interface EmailWindowMessage {
  readonly tenant: string;
  readonly from: string;
  readonly to: string;
  readonly claimId: string;
}

/** Puts one message on the queue; throws when it may not have (StorageUnavailableError and co.). */
export interface EmailWindowQueue {
  send(message: EmailWindowMessage): Promise<void>;
}

export function encodeEmailWindowMessage(message: EmailWindowMessage): string {
  const { tenant, from, to, claimId } = message;
  return Buffer.from(JSON.stringify({ tenant, from, to, claimId }), 'utf8').toString('base64');
}

export function decodeEmailWindowMessage(text: string): EmailWindowMessage {
  return JSON.parse(Buffer.from(text, 'base64').toString('utf8')) as EmailWindowMessage;
}
