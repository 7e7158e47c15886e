import mqtt, { type IClientOptions, type MqttClient } from 'mqtt';

/** Connects with mqtt.js and resolves once the CONNACK accepted the session. */
export function mqttConnect(port: number, opts: IClientOptions = {}): Promise<MqttClient> {
  return new Promise((resolve, reject) => {
    const client = mqtt.connect({
      host: '127.0.0.1',
      port,
      reconnectPeriod: 0,
      connectTimeout: 5000,
      ...opts,
    });
    client.once('connect', () => resolve(client));
    client.once('error', (err) => {
      client.end(true);
      reject(err);
    });
    // A refused WebSocket upgrade or a connect timeout closes without an 'error'.
    client.once('close', () => {
      client.end(true);
      reject(new Error('connection closed before CONNACK'));
    });
  });
}

/** Resolves with the CONNACK return code (3.1.1) or reason code (5) of a refused CONNECT. */
export async function mqttRefusal(port: number, opts: IClientOptions): Promise<number> {
  try {
    const client = await mqttConnect(port, opts);
    await client.endAsync();
  } catch (err) {
    return (err as { code: number }).code;
  }
  throw new Error('CONNECT was accepted');
}

/** Waits for the next message on `topic` (exact match) or rejects after `timeoutMs`. */
export function nextMessage(
  client: MqttClient,
  topic: string | RegExp,
  timeoutMs = 5000,
): Promise<{ topic: string; payload: Buffer }> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      client.off('message', onMessage);
      reject(new Error(`no message on ${topic} within ${timeoutMs} ms`));
    }, timeoutMs);
    const onMessage = (t: string, payload: Buffer) => {
      if (typeof topic === 'string' ? t !== topic : !topic.test(t)) return;
      clearTimeout(timer);
      client.off('message', onMessage);
      resolve({ topic: t, payload });
    };
    client.on('message', onMessage);
  });
}

/** Resolves when the client's connection closes (or rejects after `timeoutMs`). */
export function closed(client: MqttClient, timeoutMs = 5000): Promise<void> {
  return new Promise((resolve, reject) => {
    if (!client.connected && client.disconnected) {
      resolve();
      return;
    }
    const timer = setTimeout(() => reject(new Error('connection stayed open')), timeoutMs);
    client.once('close', () => {
      clearTimeout(timer);
      resolve();
    });
  });
}
