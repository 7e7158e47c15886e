import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { describe, it } from 'node:test';
import pkg from '../package.json' with { type: 'json' };
import { withConfigTable } from '../scripts/config-table.js';

describe('README', () => {
  it('starts with the install-and-start and the install-and-test commands', async () => {
    const readme = await readFile(new URL('../README.md', import.meta.url), 'utf8');
    const block = readme.split('```')[1];
    assert.match(block, /npm ci && npm start/);
    assert.match(block, /npm ci && npm test/);
    assert.ok(pkg.scripts.start.includes('build.mjs'), 'npm start builds before it starts');
  });

  it('has a configuration table that matches src/config.ts (run npm run docs:config)', async () => {
    const readme = await readFile(new URL('../README.md', import.meta.url), 'utf8');
    assert.equal(readme, withConfigTable(readme));
  });

  it('CI runs exactly the README test command', async () => {
    const ci = await readFile(new URL('../.ci/run', import.meta.url), 'utf8');
    assert.match(ci, /^npm ci && npm test$/m);
  });
});
