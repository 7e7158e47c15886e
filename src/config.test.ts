import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ConfigError, configWith, helpText, loadConfig, OPTIONS } from './config.js';

describe('loadConfig', () => {
  let dir: string;
  let file: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'edge-cfg-'));
    file = join(dir, 'config.json');
    await writeFile(
      file,
      JSON.stringify({
        http: { port: 1001 },
        mqtt: { port: 1002 },
        coap: { port: 1003 },
        logLevel: 'warn',
      }),
    );
  });
  after(() => rm(dir, { recursive: true, force: true }));

  it('uses the documented defaults', () => {
    const { config } = loadConfig({ env: {}, cwd: '/srv' });
    assert.equal(config.dataDir, '/srv/data');
    assert.equal(config.bind, '0.0.0.0');
    assert.equal(config.http.port, 8080);
    assert.equal(config.mqtt.port, 1883);
    assert.equal(config.coap.port, 5683);
    assert.equal(config.logLevel, 'info');
    assert.equal(config.storage.durability, 'normal');
    assert.equal(config.telemetry.maxPoints, 10_000_000);
    assert.ok(Object.isFrozen(config) && Object.isFrozen(config.http));
  });

  it('reads switches: a bool flag alone is true; true/false/on/off/1/0 anywhere', () => {
    const defaults = loadConfig({ env: {} }).config;
    assert.equal(defaults.https.enabled, true);
    assert.equal(defaults.https.port, 8443);
    assert.equal(defaults.http.redirect, false);
    const { config } = loadConfig({
      argv: ['--http-redirect', '--https', 'off', '--https-port', '0'],
      env: {},
    });
    assert.equal(config.http.redirect, true);
    assert.equal(config.https.enabled, false);
    assert.equal(config.https.port, 0);
    assert.equal(
      loadConfig({ env: { EDGE_HTTPS: '0', EDGE_HTTP_REDIRECT: 'yes' } }).config.https.enabled,
      false,
    );
    assert.equal(
      loadConfig({ argv: ['--https=true'], env: { EDGE_HTTPS: 'false' } }).config.https.enabled,
      true,
    );
    assert.throws(
      () => loadConfig({ env: { EDGE_HTTPS: 'maybe' }, argv: ['--tls-cert', 'c.pem'] }),
      (err: ConfigError) =>
        err.problems.some((p) => /--https \(env EDGE_HTTPS\) must be true or false/.test(p)) &&
        err.problems.includes('--tls-cert and --tls-key must be set together'),
    );
  });

  it('takes a public URL of scheme, host and port only', () => {
    assert.equal(
      loadConfig({ env: { EDGE_PUBLIC_URL: 'https://gw.plant.example:8443/' } }).config.http
        .publicUrl,
      'https://gw.plant.example:8443/',
    );
    assert.equal(loadConfig({ env: {} }).config.http.publicUrl, '');
    for (const bad of ['https://gw.plant.example/ui', 'gw.plant.example', 'ftp://gw']) {
      assert.throws(
        () => loadConfig({ argv: ['--public-url', bad], env: {} }),
        (err: ConfigError) => err.problems.some((p) => p.startsWith('--public-url must be')),
        bad,
      );
    }
  });

  it('lets flags beat env beat file beat defaults', () => {
    const { config } = loadConfig({
      argv: ['--config', file, '--http-port', '2001'],
      env: { EDGE_HTTP_PORT: '3001', EDGE_MQTT_PORT: '3002' },
      cwd: dir,
    });
    assert.equal(config.http.port, 2001, 'flag beats env and file');
    assert.equal(config.mqtt.port, 3002, 'env beats file');
    assert.equal(config.coap.port, 1003, 'file beats default');
    assert.equal(config.logLevel, 'warn');
    assert.equal(config.bind, '0.0.0.0', 'default when nobody sets it');
  });

  it('accepts --flag=value and port 0', () => {
    const { config } = loadConfig({ argv: ['--http-port=0', '--data-dir=/var/lib/gw'], env: {} });
    assert.equal(config.http.port, 0);
    assert.equal(config.dataDir, '/var/lib/gw');
  });

  it('names every problem at once', () => {
    let caught: unknown;
    try {
      loadConfig({
        argv: ['--http-port', '70000', '--bogus', '1', '--log-level', 'loud', '--mqtt-port'],
        env: { EDGE_COAP_PORT: 'abc' },
      });
    } catch (err) {
      caught = err;
    }
    assert.ok(caught instanceof ConfigError);
    const text = caught.message;
    assert.match(text, /--http-port \(flag\) must be an integer from 0 to 65535 \(got "70000"\)/);
    assert.match(text, /unknown flag --bogus/);
    assert.match(text, /--log-level \(flag\) must be one of/);
    assert.match(text, /flag --mqtt-port needs a value/);
    assert.match(text, /--coap-port \(env EDGE_COAP_PORT\) must be an integer/);
    assert.equal(caught.problems.length, 5);
    assert.ok(!text.includes('\n'), 'one line');
  });

  it('reports a missing or broken config file and unknown keys in it', async () => {
    assert.throws(
      () => loadConfig({ argv: ['--config', join(dir, 'none.json')], env: {} }),
      /cannot read config file/,
    );
    const broken = join(dir, 'broken.json');
    await writeFile(broken, '{ not json');
    assert.throws(() => loadConfig({ argv: ['--config', broken], env: {} }), /is not valid JSON/);
    const typo = join(dir, 'typo.json');
    await writeFile(typo, JSON.stringify({ http: { prot: 1 }, dataDri: 'x' }));
    assert.throws(
      () => loadConfig({ argv: ['--config', typo], env: {} }),
      (err: Error) =>
        /unknown setting http\.prot/.test(err.message) &&
        /unknown setting dataDri/.test(err.message),
    );
  });

  it('keeps admin credentials apart from the config', () => {
    const { config, secrets } = loadConfig({
      env: { EDGE_ADMIN_EMAIL: 'a@b.c', EDGE_ADMIN_PASSWORD: 'pw-123456' },
    });
    assert.equal(secrets.adminEmail, 'a@b.c');
    assert.equal(secrets.adminPassword, 'pw-123456');
    assert.ok(!JSON.stringify(config).includes('pw-123456'));
  });

  it('configWith merges a partial config over the defaults', () => {
    const config = configWith({ http: { port: 0 }, storage: { durability: 'full' } });
    assert.equal(config.http.port, 0);
    assert.equal(config.http.maxBodyBytes, 65536);
    assert.equal(config.storage.durability, 'full');
  });

  it('documents every flag in --help', () => {
    const help = helpText('1.2.3');
    for (const o of OPTIONS) {
      if (o.flag) assert.ok(help.includes(o.flag), `${o.flag} missing from help`);
      if (o.env) assert.ok(help.includes(o.env), `${o.env} missing from help`);
    }
  });
});
