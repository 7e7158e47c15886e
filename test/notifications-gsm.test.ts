/**
 * SMS through a GSM modem (issue 14 §9): the gateway speaks AT commands through `serialport` on
 * one end of a `socat` virtual serial pair; a small modem simulator answers on the other end.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { SerialPort } from 'serialport';
import { createDevice, startGateway, type TestGateway, waitFor } from './helpers/gateway.js';
import { SocatPair } from './helpers/modbus.js';
import { adminPost, alarmRule, raiseAlarm } from './helpers/notify.js';

/** A modem that answers AT, AT+CMGF=1 and AT+CMGS (text mode, 3GPP TS 27.005). */
class ModemSimulator {
  readonly commands: string[] = [];
  readonly messages: Array<{ number: string; text: string }> = [];
  /** Answer AT+CMGS with +CMS ERROR while set. */
  failSend = false;
  #buf = '';
  #number: string | undefined;
  #counter = 0;

  constructor(private readonly port: SerialPort) {
    port.on('data', (chunk: Buffer) => this.#data(chunk.toString('latin1')));
  }

  static async open(path: string): Promise<ModemSimulator> {
    const port = new SerialPort({ path, baudRate: 115_200, autoOpen: false });
    await new Promise<void>((resolve, reject) => port.open((e) => (e ? reject(e) : resolve())));
    return new ModemSimulator(port);
  }

  #data(text: string): void {
    this.#buf += text;
    for (;;) {
      if (this.#number !== undefined) {
        const end = this.#buf.indexOf('\x1a');
        if (end < 0) return;
        const body = this.#buf.slice(0, end);
        this.#buf = this.#buf.slice(end + 1);
        this.messages.push({ number: this.#number, text: body });
        this.#number = undefined;
        this.port.write(
          this.failSend ? '\r\n+CMS ERROR: 500\r\n' : `\r\n+CMGS: ${++this.#counter}\r\n\r\nOK\r\n`,
        );
        continue;
      }
      const cr = this.#buf.indexOf('\r');
      if (cr < 0) return;
      const cmd = this.#buf.slice(0, cr).trim();
      this.#buf = this.#buf.slice(cr + 1);
      if (cmd === '') continue;
      this.commands.push(cmd);
      const cmgs = /^AT\+CMGS="([^"]+)"$/.exec(cmd);
      if (cmgs) {
        this.#number = cmgs[1];
        this.port.write('\r\n> ');
      } else if (cmd === 'AT' || cmd === 'AT+CMGF=1') {
        this.port.write('\r\nOK\r\n');
      } else {
        this.port.write('\r\nERROR\r\n');
      }
    }
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.port.close(() => resolve()));
  }
}

describe('SMS through a GSM modem on a socat pair', () => {
  let t: TestGateway;
  let pair: SocatPair;
  let modem: ModemSimulator;

  before(async () => {
    pair = await SocatPair.create();
    modem = await ModemSimulator.open(pair.b);
    t = await startGateway({ config: { notifications: { retryBaseMs: 50, retryMaxMs: 200 } } });
  });
  after(async () => {
    await t.close();
    await modem.close();
    await pair.close();
  });

  it('sends the test SMS and alarm SMS with AT+CMGF=1 / AT+CMGS; a modem error is retried', async () => {
    const admin = await t.adminToken();
    const test = await t.api('/api/admin/settings/testSms', {
      token: admin,
      body: {
        numberTo: '+4915100000001',
        message: 'modem test',
        providerConfiguration: {
          type: 'GSM_MODEM',
          port: pair.a,
          baudRate: 115200,
          timeoutMs: 5000,
        },
      },
    });
    assert.equal(test.status, 200, await test.text());
    assert.deepEqual(modem.messages, [{ number: '+4915100000001', text: 'modem test' }]);
    assert.deepEqual(modem.commands.slice(0, 3), ['AT', 'AT+CMGF=1', 'AT+CMGS="+4915100000001"']);

    await adminPost(t, '/api/admin/settings', {
      key: 'sms',
      jsonValue: { type: 'GSM_MODEM', port: pair.a, baudRate: 115200, timeoutMs: 5000 },
    });
    await alarmRule(t, {
      target: { type: 'PHONE_NUMBERS', phoneNumbers: ['+4915100000002'] },
      templates: { SMS: { body: '${alarmType} on ${alarmOriginatorName} (${alarmSeverity})' } },
    });
    const device = await createDevice(t, 'Pump 3');
    modem.failSend = true;
    await raiseAlarm(t, device.id, 'Dry run', {}, 'MAJOR');
    await waitFor(() => modem.messages.length >= 2, 10_000, 'the first (refused) attempt');
    modem.failSend = false;
    await waitFor(() => modem.messages.length >= 3, 10_000, 'the retried SMS');
    assert.deepEqual(modem.messages.at(-1), {
      number: '+4915100000002',
      text: 'Dry run on Pump 3 (major)',
    });
    const sent = await waitFor(async () => {
      const res = await t.api('/api/notification/deliveries?pageSize=10&page=0&status=SENT', {
        token: admin,
      });
      const page = (await res.json()) as {
        data: Array<{ method: string; attempts: number; history: Array<{ error?: string }> }>;
      };
      return page.data.find((d) => d.method === 'SMS');
    });
    assert.ok(sent.attempts >= 2);
    assert.match(sent.history[0].error ?? '', /\+CMS ERROR: 500/);
  });
});
