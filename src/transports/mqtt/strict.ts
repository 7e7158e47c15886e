/**
 * MQTT protocol strictness that Aedes and mqtt-packet leave out: ill-formed UTF-8 and U+0000 in
 * topic strings, and a QoS > 0 PUBLISH without a packet identifier. Each is a protocol violation
 * after which the server closes the connection (MQTT 5 first sends DISCONNECT with the reason).
 */

// MQTT 5 §2.4 reason codes.
export const MALFORMED_PACKET = 0x81;
export const PROTOCOL_ERROR = 0x82;

/** The mark a strict string parse leaves on the packet being parsed. */
const ILL_FORMED = Symbol('illFormedUtf8');

const fatalUtf8 = new TextDecoder('utf-8', { fatal: true });

interface PacketParser {
  _parseString: (maybeBuffer?: boolean) => string | Buffer | null;
  _parseNum: () => number;
  _pos: number;
  _list: { slice: (start: number, end: number) => Buffer };
  packet: object;
}

/**
 * Makes one client's mqtt-packet parser note ill-formed UTF-8 in the strings it decodes (it
 * replaces bad bytes with U+FFFD and goes on). Only a string holding U+FFFD is looked at again,
 * so well-formed topics cost one `includes`.
 *
 * @NOTE: reaches into mqtt-packet's parser (a private method of the pinned version): the only
 * place that sees a string's bytes before they are decoded.
 */
export function markIllFormedStrings(parser: unknown): void {
  const p = parser as PacketParser;
  const parseString = p._parseString;
  if (typeof parseString !== 'function') return;
  p._parseString = function strictParseString(this: PacketParser, maybeBuffer?: boolean) {
    const start = this._pos;
    const result = parseString.call(this, maybeBuffer);
    if (typeof result === 'string' && result.includes('\uFFFD')) {
      // The string's bytes follow its 2-byte length.
      try {
        fatalUtf8.decode(this._list.slice(start + 2, this._pos));
      } catch {
        Object.assign(this.packet, { [ILL_FORMED]: true });
      }
    }
    return result;
  };
}

/**
 * Why a PUBLISH breaks the protocol, with the MQTT 5 reason code, or undefined when it does not.
 */
export function publishViolation(packet: {
  topic: string;
  qos: number;
  messageId?: number;
}): { reason: string; reasonCode: number } | undefined {
  // MQTT 3.1.1 §1.5.3 [MQTT-1.5.3-1], MQTT 5 §1.5.4 [MQTT-1.5.4-1]: ill-formed UTF-8.
  if ((packet as { [ILL_FORMED]?: boolean })[ILL_FORMED]) {
    return { reason: 'topic is not well-formed UTF-8', reasonCode: MALFORMED_PACKET };
  }
  // [MQTT-1.5.3-2] / [MQTT-1.5.4-2]: U+0000 in a string.
  if (packet.topic.includes('\u0000')) {
    return { reason: 'topic contains U+0000', reasonCode: MALFORMED_PACKET };
  }
  // MQTT 3.1.1 §2.3.1 [MQTT-2.3.1-1], MQTT 5 §2.2.1: QoS > 0 needs a non-zero packet id.
  if (packet.qos > 0 && !packet.messageId) {
    return { reason: 'QoS 1 PUBLISH with packet identifier 0', reasonCode: PROTOCOL_ERROR };
  }
  return undefined;
}
