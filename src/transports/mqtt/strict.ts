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
 * place that sees a string's bytes before they are decoded. The parser gets one shared function
 * that calls its prototype's method, not a closure of its own (about 110 B of heap per idle
 * connection).
 */
export function markIllFormedStrings(parser: unknown): void {
  const p = parser as PacketParser;
  if (typeof p._parseString !== 'function') return;
  p._parseString = strictParseString;
}

function strictParseString(this: PacketParser, maybeBuffer?: boolean): string | Buffer | null {
  const start = this._pos;
  const parseString = (Object.getPrototypeOf(this) as PacketParser)._parseString;
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

/**
 * Why a topic filter is malformed, or undefined when it is well formed: empty (MQTT 3.1.1
 * [MQTT-4.7.3-1], MQTT 5 [MQTT-4.7.3-1]), U+0000 ([MQTT-1.5.3-2] / [MQTT-1.5.4-2]), `#` other than
 * a whole last level ([MQTT-4.7.1-2] / [MQTT-4.7.1-1]), `+` other than a whole level
 * ([MQTT-4.7.1-3] / [MQTT-4.7.1-2]).
 */
export function filterProblem(filter: string): string | undefined {
  if (filter.length === 0) return 'empty topic filter';
  if (filter.includes('\u0000')) return 'topic filter contains U+0000';
  if (!filter.includes('#') && !filter.includes('+')) return undefined;
  const levels = filter.split('/');
  for (let i = 0; i < levels.length; i++) {
    const level = levels[i];
    if (level.includes('#') && (level !== '#' || i !== levels.length - 1)) {
      return `'#' must be a whole last level: ${filter}`;
    }
    if (level.includes('+') && level !== '+') return `'+' must be a whole level: ${filter}`;
  }
  return undefined;
}

/**
 * Why a SUBSCRIBE or UNSUBSCRIBE breaks the protocol, or undefined. A malformed topic filter is a
 * malformed packet in both versions: MQTT 3.1.1 closes the connection (§4.8) and MQTT 5 sends
 * DISCONNECT 0x81 first (§4.13). (MQTT 5's SUBACK reason 0x8F "Topic Filter invalid" is for a
 * filter that "is correctly formed but is not allowed for this Client".)
 */
export function subscribeViolation(packet: {
  cmd: string;
  subscriptions?: ReadonlyArray<{ topic: string }>;
  unsubscriptions?: readonly string[];
}): { reason: string; reasonCode: number } | undefined {
  if ((packet as { [ILL_FORMED]?: boolean })[ILL_FORMED]) {
    return { reason: 'topic filter is not well-formed UTF-8', reasonCode: MALFORMED_PACKET };
  }
  const filters =
    packet.cmd === 'subscribe'
      ? (packet.subscriptions ?? []).map((s) => s.topic)
      : (packet.unsubscriptions ?? []);
  for (const filter of filters) {
    const reason = filterProblem(filter);
    if (reason) return { reason, reasonCode: MALFORMED_PACKET };
  }
  return undefined;
}

type PacketListener = (this: unknown, packet: unknown) => void;

interface PacketEmitter {
  listeners(event: 'packet'): PacketListener[];
  removeAllListeners(event: 'packet'): void;
  on(event: 'packet', listener: PacketListener): void;
}

/**
 * A screen in front of the broker's handling of its clients' packets: `install(parser)` puts
 * `pass` before the broker's `packet` listeners of one client's parser; a packet for which it
 * answers false never reaches the broker (so no SUBACK goes out for a refused SUBSCRIBE).
 *
 * @NOTE: Aedes listens to its mqtt-packet parser's `packet` event (with the parser as `this`);
 * its listener is moved behind ours. The listener and the broker's listener list are shared by
 * the parsers (Aedes registers the same function on each); a parser gets a list of its own only
 * when its listeners differ. One closure per connection was about 290 B of heap per idle
 * connection.
 */
export function packetScreen(
  pass: (parser: unknown, packet: { cmd: string }) => boolean,
): (parser: unknown) => void {
  const own = Symbol('brokerListeners');
  type Screened = PacketEmitter & { [own]?: readonly PacketListener[] };
  let shared: readonly PacketListener[] | undefined;
  function screened(this: Screened, packet: unknown): void {
    if (!pass(this, packet as { cmd: string })) return;
    for (const listener of this[own] ?? shared ?? []) listener.call(this, packet);
  }
  return (parser) => {
    const p = parser as Screened;
    const broker = p.listeners('packet');
    p.removeAllListeners('packet');
    shared ??= broker;
    if (broker.length !== shared.length || broker.some((l, i) => l !== shared?.[i]))
      p[own] = broker;
    p.on('packet', screened as PacketListener);
  };
}
