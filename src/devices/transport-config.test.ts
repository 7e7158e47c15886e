import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { loadProtobuf } from './protobuf-lib.js';
import { compileTransportConfiguration, topicFilter } from './transport-config.js';

// Schemas are compiled with protobufjs, which the gateway loads before it compiles any.
before(() => loadProtobuf());

describe('topicFilter (transport-profiles.md §2.1)', () => {
  it('matches as MQTT filters do', () => {
    const cases: Array<[string, string, boolean]> = [
      ['sensors/+/data', 'sensors/boiler1/data', true],
      ['sensors/+/data', 'sensors//data', false],
      ['sensors/+/data', 'sensors/a/b/data', false],
      ['a/#', 'a', true],
      ['a/#', 'a/b/c', true],
      ['a/#', 'ab', false],
      ['#', 'anything/at/all', true],
      ['x.y/+', 'xzy/1', false],
      ['v1/devices/me/telemetry', 'v1/devices/me/telemetry', true],
    ];
    for (const [filter, topic, expected] of cases)
      assert.equal(topicFilter(filter).matches(topic), expected, `${filter} ~ ${topic}`);
  });
});

describe('compileTransportConfiguration', () => {
  const proto = (telemetry: string, rpc?: string) => ({
    type: 'MQTT',
    transportPayloadTypeConfiguration: {
      transportPayloadType: 'PROTOBUF',
      deviceTelemetryProtoSchema: telemetry,
      deviceAttributesProtoSchema: 'syntax = "proto3"; message A { optional string fw = 1; }',
      deviceRpcRequestProtoSchema: rpc,
    },
  });
  const problem = (raw: unknown) => {
    try {
      compileTransportConfiguration(raw, 'MQTT');
    } catch (err) {
      return (err as Error).message;
    }
    return 'accepted';
  };

  it('takes the last top-level message as the root and the built-in RPC schemas', () => {
    const { settings } = compileTransportConfiguration(
      proto('syntax = "proto3"; package p; message A { double x = 1; } message B { int32 y = 1; }'),
      'MQTT',
    );
    assert.equal(settings.payload.kind, 'PROTOBUF');
    if (settings.payload.kind !== 'PROTOBUF') return;
    assert.equal(settings.payload.types.telemetry.name, 'B');
    assert.equal(settings.payload.types.rpcRequest.name, 'RpcRequestMsg');
  });

  it('refuses what ThingsBoard refuses (§1.4), naming it', () => {
    assert.match(
      problem(proto('syntax = "proto2"; message A { optional int32 x = 1; }')),
      /proto3/,
    );
    assert.match(
      problem(proto('syntax = "proto3"; import "x.proto"; message A { int32 x = 1; }')),
      /import/,
    );
    assert.match(
      problem(proto('syntax = "proto3"; option java_package = "x"; message A { int32 x = 1; }')),
      /options/,
    );
    assert.match(
      problem(proto('syntax = "proto3"; message A { int32 x = 1; reserved 5; }')),
      /reserved/,
    );
    assert.match(problem(proto('syntax = "proto3"; message A { }')), /at least one field/);
    assert.match(problem(proto('syntax = "proto3"; enum E { X = 0; }')), /at least one message/);
    assert.match(
      problem(
        proto(
          'syntax = "proto3"; message T { int64 ts = 1; V values = 2; message V { double t = 1; } }',
        ),
      ),
      /'ts'.*optional int64/,
    );
    assert.match(
      problem(
        proto(
          'syntax = "proto3"; message T { double t = 1; }',
          'syntax = "proto3"; message R { string method = 1; }',
        ),
      ),
      /exactly the fields/,
    );
    assert.match(
      problem(proto('syntax = "proto3"; message T { double t = 1 }')),
      /failed to parse/,
    );
    assert.equal(
      problem(
        proto(
          'syntax = "proto3"; message T { optional int64 ts = 1; V values = 2; message V { double t = 1; } }',
        ),
      ),
      'accepted',
    );
  });
});
