// Prints the configuration table of README.md from the OPTIONS table in src/config.ts;
// with --write, replaces the table between the config-table markers in README.md.
// Run: npm run docs:config
import { readFileSync, writeFileSync } from 'node:fs';
import { OPTIONS } from '../src/config.js';

export const README_MARKERS = ['<!-- config-table:start -->', '<!-- config-table:end -->'] as const;

export function configTable(): string {
  const rows = [
    '| Flag | Environment | Config file key | Default | Meaning |',
    '|---|---|---|---|---|',
    '| `--config FILE` | | | | JSON file with any of the keys below |',
  ];
  for (const o of OPTIONS) {
    const values = o.type === 'enum' ? ` (${(o.values ?? []).join(', ')})` : '';
    const flag = o.flag ? `\`${o.flag}\`` : '';
    rows.push(`| ${flag} | \`${o.env}\` | \`${o.path}\` | \`${o.default}\` | ${o.help}${values} |`);
  }
  rows.push(
    '| | `EDGE_ADMIN_EMAIL` | | `admin@edge.local` | Tenant administrator created on first start |',
    '| | `EDGE_ADMIN_PASSWORD` | | generated | Its password; when unset, one is generated, logged once and written to `<data-dir>/initial-admin.txt` (mode 0600) |',
    '| | `EDGE_METRICS_TOKEN` | | none | Bearer token Prometheus sends to `GET /metrics` (a tenant admin JWT works too); a secret, so environment only |',
  );
  return rows.join('\n');
}

/** Returns README text with its config table replaced by the current one. */
export function withConfigTable(readme: string): string {
  const [start, end] = README_MARKERS;
  const a = readme.indexOf(start);
  const b = readme.indexOf(end);
  if (a < 0 || b < a) throw new Error('README.md has no config-table markers');
  return `${readme.slice(0, a + start.length)}\n${configTable()}\n${readme.slice(b)}`;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  if (process.argv.includes('--write')) {
    const file = new URL('../README.md', import.meta.url);
    writeFileSync(file, withConfigTable(readFileSync(file, 'utf8')));
  } else {
    console.log(configTable());
  }
}
