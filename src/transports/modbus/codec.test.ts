import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { JsonNumber } from '../../common/json-text.js';
import { type ModbusTag, parseAdHocRpc } from '../../connectors/modbus-config.js';
import { decodeBits, decodeRegisters, encodeValue } from './codec.js';

const tag = (type: ModbusTag['type'], extra: Partial<ModbusTag> = {}): ModbusTag => ({
  tag: 'k',
  type,
  functionCode: 3,
  objectsCount: type.startsWith('64') ? 4 : type.startsWith('32') ? 2 : 1,
  address: 0,
  maxRegistersPerRequest: 16,
  bitTargetType: 'bool',
  round: 6,
  ...extra,
});

const ORDERS = [
  ['BIG', 'BIG'],
  ['BIG', 'LITTLE'],
  ['LITTLE', 'BIG'],
  ['LITTLE', 'LITTLE'],
] as const;

const text = (v: unknown) => (v instanceof JsonNumber ? v.raw : String(v));

describe('Modbus codec', () => {
  it('lays out 32-bit values as the reference §3 example', () => {
    const got = ORDERS.map(([byteOrder, wordOrder]) =>
      decodeRegisters([0x0102, 0x0304], tag('32uint'), { byteOrder, wordOrder }),
    );
    assert.deepEqual(got, [0x01020304, 0x03040102, 0x02010403, 0x04030201]);
  });

  it('round-trips every numeric type in every order', () => {
    const values: Array<[ModbusTag['type'], unknown, string]> = [
      ['8int', -5, '-5'],
      ['8uint', 200, '200'],
      ['16int', -1234, '-1234'],
      ['16uint', 65535, '65535'],
      ['16float', 0.5, '0.5'],
      ['32int', -2147483648, '-2147483648'],
      ['32uint', 4294967295, '4294967295'],
      ['32float', -21.25, '-21.25'],
      ['64int', -9007199254740993n, '-9007199254740993'],
      ['64uint', 18446744073709551615n, '18446744073709551615'],
      ['64float', 1234.5678, '1234.5678'],
      ['64float', Math.PI, '3.141593'],
      ['32float', 20, '20.0'],
    ];
    for (const [byteOrder, wordOrder] of ORDERS) {
      for (const [type, value, shown] of values) {
        const t = tag(type);
        const o = { byteOrder, wordOrder };
        const payload = encodeValue(value, t, o);
        assert.equal(payload.kind, 'registers');
        const back = decodeRegisters(payload.values as number[], t, o);
        assert.equal(text(back), shown, `${type} ${byteOrder}/${wordOrder}`);
      }
    }
  });

  it('decodes bits in address order and register bits by index', () => {
    assert.deepEqual(decodeBits([true, false, false, true], tag('bits', { objectsCount: 4 })), [
      true,
      false,
      false,
      true,
    ]);
    assert.equal(decodeBits([false, true], tag('bits', { objectsCount: 2, bit: 1 })), true);
    assert.equal(decodeBits([true], tag('bits', { bitTargetType: 'int' })), 1);
    const o = { byteOrder: 'BIG', wordOrder: 'BIG' } as const;
    assert.equal(decodeRegisters([0x8001], tag('bits', { bit: 15 }), o), true);
    assert.equal(decodeRegisters([0x8001], tag('bits', { bit: 1 }), o), false);
  });

  it('decodes strings without reordering, trailing NULs removed; bytes as hex', () => {
    const o = { byteOrder: 'LITTLE', wordOrder: 'LITTLE' } as const;
    assert.equal(decodeRegisters([0x4142, 0x4300], tag('string', { objectsCount: 2 }), o), 'ABC');
    assert.equal(decodeRegisters([0x0aff], tag('bytes'), o), '0aff');
    assert.deepEqual(
      encodeValue('ABC', tag('string', { objectsCount: 2 }), o).values,
      [0x4142, 0x4300],
    );
  });

  it('scales: divider (a float division) wins over multiplier', () => {
    const o = { byteOrder: 'BIG', wordOrder: 'BIG' } as const;
    assert.equal(text(decodeRegisters([250], tag('16int', { divider: 10 }), o)), '25.0');
    assert.equal(decodeRegisters([25], tag('16int', { multiplier: 2 }), o), 50);
    assert.equal(text(decodeRegisters([25], tag('16int', { multiplier: 0.5 }), o)), '12.5');
  });

  it('writes coils from booleans, numbers and text; refuses values that do not fit', () => {
    const o = { byteOrder: 'BIG', wordOrder: 'BIG' } as const;
    const coil = tag('bits', { functionCode: 5 });
    assert.deepEqual(encodeValue('true', coil, o), { kind: 'coils', values: [true] });
    assert.deepEqual(encodeValue(0, coil, o), { kind: 'coils', values: [false] });
    assert.throws(() => encodeValue('maybe', coil, o), TypeError);
    assert.throws(() => encodeValue(70000, tag('16int'), o), TypeError);
    assert.throws(() => encodeValue('abc', tag('32float'), o), TypeError);
  });

  it('parses the ad-hoc RPC strings of reference §5', () => {
    const read = parseAdHocRpc('type=16int;functionCode=3;objectsCount=1;address=7;');
    assert.equal(read?.tag.address, 7);
    assert.equal(read?.value, undefined);
    const write = parseAdHocRpc('type=32float;functionCode=16;objectsCount=2;address=1;value=2.5;');
    assert.equal(write?.value, '2.5');
    assert.equal(parseAdHocRpc('type=16int;functionCode=3;objectsCount=1;address=7'), undefined);
    assert.equal(parseAdHocRpc('type=16int;functionCode=6;objectsCount=1;address=7;'), undefined);
    assert.equal(parseAdHocRpc({ type: '16int' }), undefined);
  });
});
