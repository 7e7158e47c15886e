/** Transformation nodes (rule-engine reference §3.2). */
import type { GatewayMsg } from '../../messages/types.js';
import { derive, processPattern, toMetadata } from '../msg.js';
import { sameJson } from '../script/interpreter.js';
import { type NodeOutput, type NodeSpec, SUCCESS } from '../types.js';
import { bool, PREFIX, record, scriptNodeSpec, str, strings, wrongResult } from './support.js';

const TRANSFORM_SCRIPT = 'return {msg: msg, metadata: metadata, msgType: msgType};';

function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/** One `{msg?, metadata?, msgType?}`: missing parts are the input's (reference §4). */
function transformed(msg: GatewayMsg, r: unknown): NodeOutput {
  if (!isObject(r)) throw wrongResult('{msg, metadata, msgType}', r);
  let data = msg.data;
  let same = true;
  if ('msg' in r) {
    data = r.msg;
    // The data as the script received it, compared as JSON text would be.
    same = sameJson(r.msg, msg.data ?? {});
  }
  const metadata = isObject(r.metadata) ? toMetadata(r.metadata) : msg.metadata;
  const type = typeof r.msgType === 'string' && r.msgType !== '' ? r.msgType : msg.type;
  return { labels: SUCCESS, msg: derive(msg, { data, metadata, type }, same) };
}

export const scriptTransform = scriptNodeSpec(
  'transform.TbTransformMsgNode',
  TRANSFORM_SCRIPT,
  (result, msg) => {
    if (!Array.isArray(result)) return transformed(msg, result);
    if (result.length === 0) throw wrongResult('a non-empty array', result);
    return result.map((r) => transformed(msg, r));
  },
);

/** `copyFrom`/`renameIn`/`deleteFrom`; v0–1 configurations used `fromMetadata: bool`. */
function where(config: Readonly<Record<string, unknown>>, key: string): 'DATA' | 'METADATA' {
  const v = config[key];
  if (v === 'DATA' || v === 'METADATA') return v;
  return bool(config, 'fromMetadata') ? 'METADATA' : 'DATA';
}

/** Regular expressions that must match a whole key (TB `matches`). */
function fullMatchers(patterns: readonly string[]): RegExp[] {
  return patterns.map((p) => new RegExp(`^(?:${p})$`));
}

function checkPatterns(config: Readonly<Record<string, unknown>>): string[] {
  const problems: string[] = [];
  for (const p of strings(config, 'keys')) {
    try {
      new RegExp(p);
    } catch {
      problems.push(`keys: "${p}" is not a regular expression`);
    }
  }
  return problems;
}

/** Applies `fn` to the metadata or to the data (when it is an object; else unchanged). */
function rewriteKeys(
  msg: GatewayMsg,
  target: 'DATA' | 'METADATA',
  fn: <T>(src: Readonly<Record<string, T>>) => Record<string, T>,
): NodeOutput {
  if (target === 'METADATA')
    return { labels: SUCCESS, msg: derive(msg, { metadata: fn(msg.metadata) }) };
  if (!isObject(msg.data)) return { labels: SUCCESS, msg };
  return { labels: SUCCESS, msg: derive(msg, { data: fn(msg.data) }) };
}

export const copyKeys: NodeSpec = {
  type: `${PREFIX}transform.TbCopyKeysNode`,
  defaults: { copyFrom: 'DATA', keys: [] },
  check: checkPatterns,
  create: ({ config }) => {
    const from = where(config, 'copyFrom');
    const keys = fullMatchers(strings(config, 'keys'));
    return {
      onMsg: (msg) => {
        if (!isObject(msg.data)) return { labels: SUCCESS, msg };
        const data = msg.data;
        const matches = (k: string) => keys.some((re) => re.test(k));
        if (from === 'DATA') {
          const metadata = { ...msg.metadata };
          for (const [k, v] of Object.entries(data)) {
            if (matches(k)) metadata[k] = typeof v === 'string' ? v : JSON.stringify(v);
          }
          return { labels: SUCCESS, msg: derive(msg, { metadata }) };
        }
        const next = { ...data };
        for (const [k, v] of Object.entries(msg.metadata)) if (matches(k)) next[k] = v;
        return { labels: SUCCESS, msg: derive(msg, { data: next }) };
      },
    };
  },
};

export const renameKeys: NodeSpec = {
  type: `${PREFIX}transform.TbRenameKeysNode`,
  defaults: { renameIn: 'DATA', renameKeysMapping: { temperatureCelsius: 'temperature' } },
  check: (c) =>
    Object.keys(record(c, 'renameKeysMapping')).length === 0
      ? ['renameKeysMapping must map at least one key']
      : [],
  create: ({ config }) => {
    const into = where(config, 'renameIn');
    const mapping = record(config, 'renameKeysMapping');
    const rename = <T>(src: Readonly<Record<string, T>>): Record<string, T> => {
      const out: Record<string, T> = { ...src };
      for (const [from, to] of Object.entries(mapping)) {
        if (Object.hasOwn(out, from)) {
          const v = out[from] as T;
          delete out[from];
          out[to] = v;
        }
      }
      return out;
    };
    return { onMsg: (msg) => rewriteKeys(msg, into, rename) };
  },
};

export const deleteKeys: NodeSpec = {
  type: `${PREFIX}transform.TbDeleteKeysNode`,
  defaults: { deleteFrom: 'DATA', keys: [] },
  check: checkPatterns,
  create: ({ config }) => {
    const from = where(config, 'deleteFrom');
    const keys = fullMatchers(strings(config, 'keys'));
    const strip = <T>(src: Readonly<Record<string, T>>): Record<string, T> => {
      const out: Record<string, T> = {};
      for (const [k, v] of Object.entries(src)) if (!keys.some((re) => re.test(k))) out[k] = v;
      return out;
    };
    return { onMsg: (msg) => rewriteKeys(msg, from, strip) };
  },
};

export const toEmail: NodeSpec = {
  type: `${PREFIX}mail.TbMsgToEmailNode`,
  defaults: {
    fromTemplate: 'info@testmail.org',
    toTemplate: '${userEmail}',
    ccTemplate: null,
    bccTemplate: null,
    subjectTemplate: 'Device ${deviceType} temperature high',
    bodyTemplate: 'Device ${deviceName} has high temperature $[temperature]',
    mailBodyType: 'false',
    isHtmlTemplate: null,
  },
  create: ({ config }) => {
    const t = (key: string) => str(config, key);
    return {
      onMsg: (msg) => {
        const fill = (key: string) => {
          const pattern = t(key);
          return pattern === '' ? null : processPattern(pattern, msg);
        };
        const bodyType = str(config, 'mailBodyType', 'false');
        const html =
          bodyType === 'dynamic'
            ? processPattern(t('isHtmlTemplate'), msg) === 'true'
            : bodyType === 'true';
        const data = {
          from: fill('fromTemplate'),
          to: fill('toTemplate'),
          cc: fill('ccTemplate'),
          bcc: fill('bccTemplate'),
          subject: fill('subjectTemplate'),
          body: fill('bodyTemplate'),
          images: null,
          html,
        };
        return { labels: SUCCESS, msg: derive(msg, { type: 'SEND_EMAIL', data }) };
      },
    };
  },
};
