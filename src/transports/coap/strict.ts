/**
 * CoAP message checks of RFC 7252 that the `coap` library leaves out, made on each datagram
 * before the library sees it: the header and options are parsed (§3, §3.1), a malformed message
 * is rejected (§4.2, §4.3), an Empty CON (a "ping") gets a RST (§4.3), a request with an
 * unrecognized critical option gets 4.02 Bad Option (§5.4.1). Every answer is built here, with a
 * short diagnostic payload of our own; no library error text ever reaches the wire.
 */

// §3: message types.
const CON = 0;
const NON = 1;
const ACK = 2;
const RST = 3;

/**
 * Option numbers this server understands (RFC 7252 §12.2, RFC 7641 Observe, RFC 7959 Block1/2,
 * Size2, RFC 7967 No-Response). An odd number not listed is an unrecognized critical option.
 */
const KNOWN_OPTIONS = new Set([
  1, 3, 4, 5, 6, 7, 8, 11, 12, 14, 15, 17, 20, 23, 27, 28, 35, 39, 60, 258,
]);

/** What to do with one datagram. */
export type Verdict =
  /** Hand it to the CoAP library. */
  | { readonly kind: 'pass' }
  /** Nothing to answer (§3 unknown version, §4.3 rejected NON, ACK/RST not understood). */
  | { readonly kind: 'drop'; readonly reason: string }
  /** Answer `reply` and process nothing. */
  | { readonly kind: 'answer'; readonly reply: Buffer; readonly reason: string };

export interface MessageHeader {
  readonly type: number;
  readonly code: number;
  readonly messageId: number;
  readonly token: Buffer;
}

/** §4.2: a RST with the rejected message's Message ID. */
export function resetFor(messageId: number): Buffer {
  return Buffer.from([0x40 | (RST << 4), 0, messageId >> 8, messageId & 0xff]);
}

/**
 * A response to `req` with `code` (`class.detail`) and a diagnostic payload (§5.5.2): piggybacked
 * on an ACK for a CON request, a NON for a NON request (§5.2.1, §5.2.3).
 */
export function responseFor(req: MessageHeader, code: string, diagnostic: string): Buffer {
  const [cls, detail] = code.split('.').map(Number);
  const type = req.type === CON ? ACK : NON;
  const payload = Buffer.from(diagnostic, 'utf8');
  return Buffer.concat([
    Buffer.from([
      0x40 | (type << 4) | req.token.length,
      (cls << 5) | detail,
      req.messageId >> 8,
      req.messageId & 0xff,
    ]),
    req.token,
    payload.length > 0 ? Buffer.from([0xff]) : Buffer.alloc(0),
    payload,
  ]);
}

/** Parses the 4-byte header (§3); undefined when the datagram is shorter. */
export function parseHeader(msg: Buffer): (MessageHeader & { version: number }) | undefined {
  if (msg.length < 4) return undefined;
  const tkl = msg[0] & 0x0f;
  return {
    version: msg[0] >> 6,
    type: (msg[0] >> 4) & 0x03,
    code: msg[1],
    messageId: msg.readUInt16BE(2),
    token: msg.subarray(4, 4 + Math.min(tkl, 8)),
  };
}

/** Rejects a malformed message (§4.2: CON gets a RST; §4.3: NON, ACK and RST are ignored). */
function reject(h: MessageHeader, reason: string): Verdict {
  return h.type === CON
    ? { kind: 'answer', reply: resetFor(h.messageId), reason }
    : { kind: 'drop', reason };
}

/**
 * The §3.1 option list from `offset`: returns the offset of the payload, or a reason the options
 * are malformed, with the first unrecognized critical option met.
 */
function walkOptions(
  msg: Buffer,
  offset: number,
): { end: number; unknownCritical?: number } | { error: string } {
  let number = 0;
  let unknownCritical: number | undefined;
  let pos = offset;
  while (pos < msg.length) {
    const byte = msg[pos];
    if (byte === 0xff) {
      // §3: a payload marker followed by a zero-length payload is a format error.
      if (pos + 1 >= msg.length) return { error: 'payload marker without a payload' };
      return { end: pos + 1, unknownCritical };
    }
    pos++;
    const ext = (nibble: number): number | undefined => {
      if (nibble < 13) return nibble;
      if (nibble === 13) {
        if (pos + 1 > msg.length) return undefined;
        return msg[pos++] + 13;
      }
      if (nibble === 14) {
        if (pos + 2 > msg.length) return undefined;
        const v = msg.readUInt16BE(pos) + 269;
        pos += 2;
        return v;
      }
      return undefined; // 15 is reserved (§3.1)
    };
    const delta = ext(byte >> 4);
    const length = ext(byte & 0x0f);
    if (delta === undefined || length === undefined) {
      return { error: 'malformed option header' };
    }
    number += delta;
    if (pos + length > msg.length) return { error: `option ${number} runs past the end` };
    pos += length;
    if (number % 2 === 1 && !KNOWN_OPTIONS.has(number) && unknownCritical === undefined) {
      unknownCritical = number;
    }
  }
  return { end: pos, unknownCritical };
}

/** Checks one datagram (RFC 7252 §3, §4, §5.4.1). */
export function inspectDatagram(msg: Buffer): Verdict {
  const h = parseHeader(msg);
  // §4.2/§4.3 need a Message ID to reject with; a datagram without one is dropped.
  if (!h)
    return { kind: 'drop', reason: `datagram of ${msg.length} bytes is shorter than a header` };
  // §3: unknown version numbers MUST be silently ignored.
  if (h.version !== 1) return { kind: 'drop', reason: `unknown CoAP version ${h.version}` };
  const tkl = msg[0] & 0x0f;
  // §3: token lengths 9-15 are reserved and a message format error.
  if (tkl > 8) return reject(h, `token length ${tkl}`);
  if (msg.length < 4 + tkl) return reject(h, 'datagram ends inside the token');
  const cls = h.code >> 5;
  if (h.code === 0) {
    // §4.1: an Empty message has no token and no bytes after the Message ID.
    if (msg.length !== 4) return reject(h, 'Empty message with a token, options or payload');
    // §4.3: an Empty CON is a "CoAP ping", answered with a RST. Empty ACK/RST pass to the
    // library: they end retransmissions and observations. An Empty NON is meaningless.
    if (h.type === CON) return { kind: 'answer', reply: resetFor(h.messageId), reason: 'ping' };
    if (h.type === NON) return { kind: 'drop', reason: 'Empty NON message' };
    return { kind: 'pass' };
  }
  // §4.2/§4.3: an ACK or RST carrying a request or a response is never processed here (a RST
  // carrying a POST stored data before).
  if (h.type === ACK || h.type === RST) return { kind: 'drop', reason: 'ACK or RST with a code' };
  // §4.2: reserved classes 1, 6, 7 are rejected; responses (2-5) are not for a server.
  if (cls !== 0)
    return reject(h, `code ${cls}.${String(h.code & 0x1f).padStart(2, '0')} is not a request`);
  const options = walkOptions(msg, 4 + tkl);
  if ('error' in options) return reject(h, options.error);
  if (options.unknownCritical !== undefined) {
    const reason = `unrecognized critical option ${options.unknownCritical}`;
    // §5.4.1: a CON request gets 4.02 with a diagnostic; a NON request is rejected (§4.3).
    return h.type === CON
      ? { kind: 'answer', reply: responseFor(h, '4.02', reason), reason }
      : { kind: 'answer', reply: resetFor(h.messageId), reason };
  }
  return { kind: 'pass' };
}

/** The Message ID, type and token of an outgoing message (observe notifications are tracked). */
export function outgoingHeader(msg: Buffer): MessageHeader | undefined {
  const h = parseHeader(msg);
  return h && h.version === 1 ? h : undefined;
}

export const MESSAGE_TYPE = { CON, NON, ACK, RST } as const;
