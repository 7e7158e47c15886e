import { useState } from 'preact/hooks';
import { BarButton, DeleteButton, ListPage, usePagedList } from '../components/list.js';
import { ErrorText, JsonImportDialog, useAction, useLoad } from '../components/ui.js';
import { api, errorText, type Id, qs } from '../lib/api.js';
import { Link } from '../lib/router.js';

/**
 * Rule chains: list, set root, import and export ThingsBoard's chain JSON, a read-only graph of
 * nodes and connections, and JSON editing of the metadata.
 */

interface RuleChain {
  id: Id;
  name: string;
  root: boolean;
  type?: string;
}

interface Node {
  id?: Id;
  type: string;
  name: string;
  configuration?: Record<string, unknown>;
  additionalInfo?: { layoutX?: number; layoutY?: number } | null;
}

interface Metadata {
  ruleChainId?: Id;
  firstNodeIndex: number | null;
  nodes: Node[];
  connections: Array<{ fromIndex: number; toIndex: number; type: string }> | null;
  [k: string]: unknown;
}

function download(name: string, data: unknown): void {
  const url = URL.createObjectURL(
    new Blob([JSON.stringify(data, null, 2)], { type: 'application/json' }),
  );
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  a.click();
  URL.revokeObjectURL(url);
}

export function RuleChainsPage() {
  const [importing, setImporting] = useState(false);
  const list = usePagedList<RuleChain>(
    (page) =>
      `/api/ruleChains${qs({ pageSize: 20, page, sortProperty: 'name', sortOrder: 'ASC' })}`,
  );
  const act = useAction();
  const exportChain = (c: RuleChain) =>
    void act.run(async () =>
      download(`${c.name}.json`, await api(`/api/ruleChain/${c.id.id}/export`)),
    );
  return (
    <ListPage
      title="Rule chains"
      actions={<BarButton label="Import rule chain" onClick={() => setImporting(true)} />}
      error={act.error}
      label="Rule chains"
      list={list}
      rowKey={(c) => c.id.id}
      columns={[
        { title: 'Name', cell: (c) => <Link href={`/rule-chains/${c.id.id}`}>{c.name}</Link> },
        { title: 'Root', cell: (c) => (c.root ? 'Root' : '') },
        {
          title: 'Actions',
          class: 'actions',
          cell: (c) => (
            <>
              {!c.root && (
                <button
                  type="button"
                  onClick={() =>
                    void act
                      .run(() => api(`/api/ruleChain/${c.id.id}/root`, { method: 'POST' }))
                      .then(list.reload)
                  }
                >
                  Make root
                </button>
              )}
              <button type="button" onClick={() => exportChain(c)}>
                Export
              </button>
              {!c.root && (
                <DeleteButton
                  act={act}
                  what={`rule chain ${c.name}`}
                  path={`/api/ruleChain/${c.id.id}`}
                  then={list.reload}
                />
              )}
            </>
          ),
        },
      ]}
    >
      {importing && (
        <ImportChain
          onClose={() => setImporting(false)}
          onDone={() => {
            setImporting(false);
            list.reload();
          }}
        />
      )}
    </ListPage>
  );
}

function ImportChain(props: { onClose: () => void; onDone: () => void }) {
  return (
    <JsonImportDialog
      title="Import rule chain"
      fileLabel="Rule chain export (JSON file)"
      onImport={async (body) => {
        await api('/api/ruleChain/import', { body });
        props.onDone();
      }}
      onClose={props.onClose}
    />
  );
}

const NODE_W = 150;
const NODE_H = 44;

/** Node positions: the editor's layout when the chain has one, else columns by depth. */
function layout(meta: Metadata): Array<{ x: number; y: number }> {
  const n = meta.nodes.length;
  const has = meta.nodes.every((node) => typeof node.additionalInfo?.layoutX === 'number');
  if (has) {
    const xs = meta.nodes.map((node) => node.additionalInfo?.layoutX ?? 0);
    const ys = meta.nodes.map((node) => node.additionalInfo?.layoutY ?? 0);
    const minX = Math.min(...xs);
    const minY = Math.min(...ys);
    return meta.nodes.map((_, i) => ({ x: xs[i] - minX + 10, y: ys[i] - minY + 10 }));
  }
  const depth = new Array<number>(n).fill(-1);
  const start = meta.firstNodeIndex ?? 0;
  const queue = n > 0 ? [start] : [];
  if (n > 0) depth[start] = 0;
  while (queue.length > 0) {
    const i = queue.shift() as number;
    for (const c of meta.connections ?? []) {
      if (c.fromIndex === i && depth[c.toIndex] < 0) {
        depth[c.toIndex] = depth[i] + 1;
        queue.push(c.toIndex);
      }
    }
  }
  const rows = new Map<number, number>();
  return depth.map((d) => {
    const col = d < 0 ? Math.max(0, ...depth) + 1 : d;
    const row = rows.get(col) ?? 0;
    rows.set(col, row + 1);
    return { x: 10 + col * (NODE_W + 60), y: 10 + row * (NODE_H + 40) };
  });
}

/** A read-only drawing of the chain: boxes for nodes, labelled arrows for connections. */
function ChainGraph(props: { meta: Metadata }) {
  const pos = layout(props.meta);
  const width = Math.max(300, ...pos.map((p) => p.x + NODE_W + 20));
  const height = Math.max(120, ...pos.map((p) => p.y + NODE_H + 20));
  return (
    <div class="scroll graph">
      <svg
        width={width}
        height={height}
        role="img"
        aria-label={`Graph of ${props.meta.nodes.length} rule nodes`}
      >
        <defs>
          <marker
            id="arrow"
            viewBox="0 0 10 10"
            refX="10"
            refY="5"
            markerWidth="6"
            markerHeight="6"
            orient="auto"
          >
            <path d="M0,0 L10,5 L0,10 z" fill="#4a5a6a" />
          </marker>
        </defs>
        {(props.meta.connections ?? []).map((c) => {
          const a = pos[c.fromIndex];
          const b = pos[c.toIndex];
          if (!a || !b) return null;
          const x1 = a.x + NODE_W;
          const y1 = a.y + NODE_H / 2;
          const x2 = b.x;
          const y2 = b.y + NODE_H / 2;
          return (
            <g key={`${c.fromIndex}-${c.toIndex}-${c.type}`}>
              <path
                d={`M${x1},${y1} C${x1 + 40},${y1} ${x2 - 40},${y2} ${x2},${y2}`}
                fill="none"
                stroke="#4a5a6a"
                marker-end="url(#arrow)"
              />
              <text
                x={(x1 + x2) / 2}
                y={(y1 + y2) / 2 - 4}
                font-size="11"
                text-anchor="middle"
                fill="#1b2733"
              >
                {c.type}
              </text>
            </g>
          );
        })}
        {props.meta.nodes.map((node, i) => (
          <g key={node.id?.id ?? i}>
            <rect
              x={pos[i].x}
              y={pos[i].y}
              width={NODE_W}
              height={NODE_H}
              rx="6"
              fill={i === props.meta.firstNodeIndex ? '#e3f2fd' : '#fff'}
              stroke="#0b57a4"
            />
            <text
              x={pos[i].x + 8}
              y={pos[i].y + 18}
              font-size="12"
              font-weight="600"
              fill="#1b2733"
            >
              {node.name.slice(0, 21)}
            </text>
            <text x={pos[i].x + 8} y={pos[i].y + 34} font-size="10" fill="#4a5a6a">
              {node.type.split('.').pop()?.slice(0, 25)}
            </text>
          </g>
        ))}
      </svg>
    </div>
  );
}

export function RuleChainPage(props: { params: Record<string, string> }) {
  const id = props.params.id;
  const chain = useLoad(() => api<RuleChain>(`/api/ruleChain/${id}`), [id]);
  const meta = useLoad(() => api<Metadata>(`/api/ruleChain/${id}/metadata`), [id]);
  const [json, setJson] = useState<string | null>(null);
  const [saved, setSaved] = useState('');
  const save = useAction();
  const doSave = () =>
    void save.run(async () => {
      let body: unknown;
      try {
        body = JSON.parse(json ?? '');
      } catch (err) {
        throw new Error(`The JSON does not parse: ${errorText(err)}`);
      }
      await api('/api/ruleChain/metadata', { body });
      setJson(null);
      setSaved('Saved');
      meta.reload();
    });
  return (
    <section class="stack">
      <p class="crumbs">
        <Link href="/rule-chains">Rule chains</Link> /
      </p>
      <div class="bar">
        <h1>{chain.data?.name ?? 'Rule chain'}</h1>
        {meta.data && (
          <button
            type="button"
            onClick={() => setJson(json === null ? JSON.stringify(meta.data, null, 2) : null)}
          >
            {json === null ? 'Edit JSON' : 'Graph'}
          </button>
        )}
        {json !== null && (
          <button type="button" class="primary" onClick={doSave} disabled={save.busy}>
            Save metadata
          </button>
        )}
        <output aria-live="polite">{saved}</output>
      </div>
      <ErrorText error={chain.error || meta.error || save.error} />
      {json !== null ? (
        <label>
          Rule chain metadata (nodes and connections)
          <textarea rows={24} value={json} onInput={(e) => setJson(e.currentTarget.value)} />
        </label>
      ) : (
        meta.data && <ChainGraph meta={meta.data} />
      )}
    </section>
  );
}
