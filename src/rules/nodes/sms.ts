/**
 * The send SMS node (rule-engine reference §3.5, `sms.TbSendSmsNode`): renders the numbers and
 * the text from the message, then sends through the system SMS provider or the node's own
 * (`TWILIO`, `HTTP`, `GSM_MODEM`; docs/notifications.md). Any number that fails sends the
 * message to `Failure`.
 */
import { smsProviderConfig } from '../../notifications/system-settings.js';
import { processPattern } from '../msg.js';
import { type NodeSpec, SUCCESS } from '../types.js';
import { bool, PREFIX, str } from './support.js';

export const sendSms: NodeSpec = {
  type: `${PREFIX}sms.TbSendSmsNode`,
  defaults: {
    numbersToTemplate: '${userPhone}',
    smsMessageTemplate: 'Device ${deviceName} has high temperature $[temperature]',
    useSystemSmsSettings: true,
    smsProviderConfiguration: null,
  },
  check: (c) => {
    if (bool(c, 'useSystemSmsSettings', true)) return [];
    const r = smsProviderConfig.safeParse(c.smsProviderConfiguration);
    if (r.success) return [];
    const type = (c.smsProviderConfiguration as { type?: unknown } | null)?.type;
    if (type === 'AWS_SNS' || type === 'SMPP')
      return [`smsProviderConfiguration.type ${type} is not supported (TWILIO, HTTP, GSM_MODEM)`];
    return r.error.issues.map(
      (i) => `smsProviderConfiguration${i.path.length ? `.${i.path.join('.')}` : ''}: ${i.message}`,
    );
  },
  create: ({ config, services }) => {
    const provider = bool(config, 'useSystemSmsSettings', true)
      ? undefined
      : smsProviderConfig.parse(config.smsProviderConfiguration);
    const numbers = str(config, 'numbersToTemplate');
    const text = str(config, 'smsMessageTemplate');
    return {
      onMsg: async (msg) => {
        const to = processPattern(numbers, msg)
          .split(',')
          .map((n) => n.trim())
          .filter(Boolean);
        if (to.length === 0) throw new Error('SMS destination can not be blank [numbersTo]');
        const body = processPattern(text, msg);
        for (const number of to) await services.sendSms(number, body, provider);
        return { labels: SUCCESS, msg };
      },
    };
  },
};
