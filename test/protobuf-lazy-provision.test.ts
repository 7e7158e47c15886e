/**
 * protobufjs is loaded on first use (src/devices/protobuf-lib.ts): the first Protobuf
 * provisioning request over CoAP loads it and is answered in Protobuf, as before. Its own file:
 * the library is loaded once per process.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import protobuf from 'protobufjs';
import { protobufLoaded } from '../src/devices/protobuf-lib.js';
import { coapRequest } from './helpers/coap.js';
import { startGateway, type TestGateway } from './helpers/gateway.js';

const transport = protobuf.parse(`syntax = "proto3";
package transport;
message ProvisionDeviceCredentialsMsg { string provisionDeviceKey = 1; string provisionDeviceSecret = 2; }
message ProvisionDeviceRequestMsg { string deviceName = 1; int32 credentialsType = 2;
  ProvisionDeviceCredentialsMsg provisionDeviceCredentialsMsg = 3; }
enum ResponseStatus { UNKNOWN = 0; SUCCESS = 1; NOT_FOUND = 2; FAILURE = 3; }
message ProvisionDeviceResponseMsg { ResponseStatus status = 1; int32 credentialsType = 2;
  string credentialsValue = 3; }`).root;
const ProvisionRequest = transport.lookupType('transport.ProvisionDeviceRequestMsg');
const ProvisionResponse = transport.lookupType('transport.ProvisionDeviceResponseMsg');

describe('protobufjs loaded by the first Protobuf provisioning request', () => {
  let t: TestGateway;

  before(async () => {
    t = await startGateway();
    const admin = await t.adminToken();
    const res = await t.api('/api/deviceProfile', {
      token: admin,
      body: {
        name: 'provisioned in proto',
        profileData: {
          provisionConfiguration: {
            type: 'ALLOW_CREATE_NEW_DEVICES',
            provisionDeviceKey: 'lazy-key',
            provisionDeviceSecret: 'lazy-secret',
          },
        },
      },
    });
    assert.equal(res.status, 200, await res.clone().text());
  });
  after(() => t.close());

  it('CoAP: a ProvisionDeviceRequestMsg is answered with a ProvisionDeviceResponseMsg', async () => {
    const post = (payload: Buffer | string) =>
      coapRequest({
        port: t.gw.ports.coap,
        method: 'POST',
        pathname: '/api/v1/provision',
        payload,
      });
    const json = await post(
      JSON.stringify({ provisionDeviceKey: 'lazy-key', provisionDeviceSecret: 'wrong' }),
    );
    assert.equal(json.code, '4.00');
    assert.equal(protobufLoaded(), false, 'JSON provisioning does not load it');

    const request = ProvisionRequest.fromObject({
      deviceName: 'born-lazy',
      provisionDeviceCredentialsMsg: {
        provisionDeviceKey: 'lazy-key',
        provisionDeviceSecret: 'lazy-secret',
      },
    });
    const ok = await post(Buffer.from(ProvisionRequest.encode(request).finish()));
    assert.equal(ok.code, '2.01');
    assert.equal(ok.format, 'application/octet-stream');
    const body = ProvisionResponse.toObject(ProvisionResponse.decode(ok.payload), {
      enums: String,
    });
    assert.equal(body.status, 'SUCCESS');
    assert.ok(body.credentialsValue);
    assert.equal(protobufLoaded(), true);
  });
});
