// The fleet map: per GPU instance type, the network as nested domains (layer-1 > 2 > 3 [> 4] > node),
// one cell per node coloured by its free GPUs, every node the same area.
//
// The nested layout (squarified, as a treemap lays it out) is computed here, once per answer; ECharts
// draws it as two custom series of plain rectangles: the domains (a filled rectangle each, its
// margin the domain's border, a header with its name where there is room), then the nodes on top.
// An ECharts treemap drew the same picture, but it builds a model, a label and a background per tree
// node: 3 s for 10,000 nodes on a loaded 2-core machine, against the 1.5 s first-paint target
// (docs/benchmarks.md has both). Shared by the fleet page and the job page (a job's nodes lit).
import { chart, TEXT } from "./charts.js";
import { esc, freeColour } from "./util.js";

const LIT = "#e11d48";
const STAR = "#f97316";
const BORDER = ["#111827", "#374151", "#4b5563", "#6b7280"]; // layer-1, 2, 3, 4
const HEADER = 16; // a named domain's header, its name in it
const MAX_NAMED = 300; // a layer's names are shown only up to this many domains (2,500 names cannot be read)
const BIG = 400; // above this many nodes: no number in the cells, thinner borders

// payload: GET /v1/topology?view=capacity&nodes=true. Returns per instance type its nodes and a tree.
export function fleetModel(payload) {
  const cols = Object.fromEntries((payload.node_columns || []).map((c, i) => [c, i]));
  const jobs = payload.jobs || [];
  const byType = new Map();
  for (const row of payload.nodes || []) {
    const node = {
      name: row[cols.name], type: row[cols.instance_type], path: row[cols.path], gpus: row[cols.gpus],
      free: row[cols.free_gpus], available: row[cols.available], jobs: row[cols.jobs] || [],
    };
    if (!byType.has(node.type)) byType.set(node.type, []);
    byType.get(node.type).push(node);
  }
  const types = (payload.instance_types || []).map((t) => ({ ...t, nodes: byType.get(t.instance_type) || [] }));
  for (const [type, nodes] of byType) {
    if (!types.some((t) => t.instance_type === type)) types.push({ instance_type: type, nodes, levels: [], gpus_per_node: nodes[0].gpus, free_gpus: nodes.reduce((a, n) => a + n.free, 0), unavailable_nodes: nodes.filter((n) => !n.available).length });
  }
  return { types, jobs, generatedAt: payload.generated_at };
}

function domainStats() {
  return { nodes: 0, free: 0, freeNodes: 0, out: 0, jobs: new Set() };
}

// The nested tree for one instance type, with per-domain statistics for the tooltips and the number
// of domains per layer (perLevel[0]: layer-1).
export function tree(type) {
  const root = { children: new Map(), stats: domainStats(), depth: 0, weight: 0 };
  for (const node of type.nodes) {
    const path = node.path && node.path.length ? node.path : ["(no topology labels)"];
    let at = root;
    const chain = [root];
    path.forEach((domain, depth) => {
      if (!at.children.has(domain)) at.children.set(domain, { name: domain, depth: depth + 1, children: new Map(), stats: domainStats(), weight: 0 });
      at = at.children.get(domain);
      chain.push(at);
    });
    for (const d of chain) {
      d.weight += 1;
      d.stats.nodes += 1;
      d.stats.free += node.available ? node.free : 0;
      d.stats.freeNodes += node.available && node.free === node.gpus ? 1 : 0;
      d.stats.out += node.available ? 0 : 1;
      for (const j of node.jobs) d.stats.jobs.add(j);
    }
    at.children.set(`node:${node.name}`, { leaf: node, weight: 1 });
  }
  root.perLevel = [];
  const count = (d) => {
    for (const c of d.children.values()) {
      if (c.leaf) continue;
      root.perLevel[c.depth - 1] = (root.perLevel[c.depth - 1] || 0) + 1;
      count(c);
    }
  };
  count(root);
  return root;
}

// The worst aspect ratio of a row of `n` items of total area `sum` (smallest `min`, largest `max`)
// laid along a side of length `side` (Bruls, Huizing and van Wijk, "Squarified Treemaps", 2000).
function worst(sum, min, max, side) {
  const s2 = sum * sum, w2 = side * side;
  return Math.max((w2 * max) / s2, s2 / (w2 * min));
}

// Squarified layout of `items` (each with a `weight`, largest first) in the rectangle x, y, w, h:
// sets each item's `rect` [x, y, w, h].
export function squarify(items, x, y, w, h) {
  const total = items.reduce((a, c) => a + c.weight, 0);
  if (!total || w <= 0 || h <= 0) {
    for (const c of items) c.rect = [x, y, 0, 0];
    return;
  }
  const scale = (w * h) / total;
  let i = 0;
  while (i < items.length) {
    const side = Math.min(w, h);
    let sum = items[i].weight * scale, min = sum, max = sum, j = i + 1;
    let ratio = worst(sum, min, max, side);
    for (; j < items.length; j += 1) {
      const a = items[j].weight * scale;
      const next = worst(sum + a, Math.min(min, a), Math.max(max, a), side);
      if (next > ratio) break;
      sum += a; min = Math.min(min, a); max = Math.max(max, a); ratio = next;
    }
    const thick = side ? sum / side : 0;
    let at = 0;
    for (let k = i; k < j; k += 1) {
      const len = thick ? (items[k].weight * scale) / thick : 0;
      items[k].rect = w >= h ? [x, y + at, thick, len] : [x + at, y, len, thick];
      at += len;
    }
    if (w >= h) { x += thick; w -= thick; } else { y += thick; h -= thick; }
    i = j;
  }
}

// The map's rectangles for `root` (tree()) in a width x height canvas: the domains (outermost first,
// so each is drawn under its children) and the nodes, each with its rect.
export function layout(root, width, height, { big, star }) {
  const domains = [], nodes = [];
  const named = (depth) => (root.perLevel[depth - 1] || 0) <= MAX_NAMED;
  const place = (d, [x, y, w, h]) => {
    let inner = [x, y, w, h];
    if (d.depth > 0) {
      const starred = star && star.domain === d.name;
      const pad = starred ? 4 : big ? Math.max(1, 4 - d.depth) : [4, 3, 2, 2][d.depth - 1] || 2;
      // a header where the whole name fits (at most 7 px a character at 10 px), never a truncated one
      const header = named(d.depth) && h > 3 * HEADER && w > 7 * (d.name.length + 2) + 2 * pad ? HEADER : 0;
      domains.push({ d, rect: [x, y, w, h], header, starred });
      inner = [x + pad, y + pad + header, Math.max(0, w - 2 * pad), Math.max(0, h - 2 * pad - header)];
    }
    const kids = [...d.children.values()].sort((a, b) => b.weight - a.weight);
    squarify(kids, ...inner);
    for (const c of kids) {
      if (c.leaf) nodes.push({ node: c.leaf, rect: c.rect });
      else place(c, c.rect);
    }
  };
  place(root, [0, 0, width, height]);
  return { domains, nodes };
}

// A cell not lit while a job is: its colour washed towards white, so the lit ones stand out.
function fade(hex) {
  const c = [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16));
  return `rgb(${c.map((v) => Math.round(v + (255 - v) * 0.75)).join(",")})`;
}

function jobLine(jobs, i) {
  const j = jobs[i];
  if (!j) return "";
  const name = j.job ? esc(j.job) : "<i>another team's job</i>";
  return `${esc(j.team)} · ${name} · ${esc(j.priority_class || "no priority class")}`;
}

export function nodeTip(n, jobs) {
  const state = n.available ? `${n.free} of ${n.gpus} GPUs free` : "left out by Kueue (not Ready, cordoned or tainted)";
  const js = n.jobs.map((i) => `<br>${jobLine(jobs, i)}`).join("");
  return `<b>${esc(n.name)}</b><br>${state}${js}`;
}

export function domainTip(d, jobs) {
  const s = d.stats;
  const ids = [...s.jobs];
  const shown = ids.slice(0, 6).map((i) => `<br>${jobLine(jobs, i)}`).join("");
  const more = ids.length > 6 ? `<br>… and ${ids.length - 6} more jobs` : "";
  const out = s.out ? `<br>${s.out} node(s) left out by Kueue (not Ready, cordoned or tainted)` : "";
  return `<b>layer-${d.depth} ${esc(d.name)}</b><br>${s.nodes} nodes · ${s.free} GPUs free · ${s.freeNodes} whole nodes free${out}` +
    (ids.length ? `<br><br>${ids.length} job(s) running:${shown}${more}` : "<br>no job running");
}

// The two series' data: per domain [x, y, w, h, header, colour], per node [x, y, w, h, colour, lit]
// (colours as indexes into `colours`); the cells' names and lit flags are the chart's own data, which
// cellsOf() reads back.
function seriesData(placed, lit) {
  const colours = [], index = new Map();
  const code = (c) => {
    if (!index.has(c)) { index.set(c, colours.length); colours.push(c); }
    return index.get(c);
  };
  const anyLit = lit && lit.size > 0;
  const domains = placed.domains.map(({ d, rect, header, starred }) => ({
    name: d.name, value: [...rect, header, code(starred ? STAR : BORDER[Math.min(d.depth, 4) - 1])],
  }));
  const nodes = placed.nodes.map(({ node: n, rect }) => {
    const on = anyLit && lit.has(n.name);
    const colour = freeColour(n.free, n.gpus, n.available);
    return { name: n.name, value: [...rect, code(anyLit && !on ? fade(colour) : colour), on ? 1 : 0] };
  });
  return { domains, nodes, colours };
}

// Draws (or redraws) the map of `type` into `container`; `lit` a Set of node names to light,
// `star` {level, domain} the domain to outline; `onDrawn` is called once ECharts has drawn all of it
// (its "finished" event: every rectangle on the canvas).
export function drawMap(container, type, jobs, { lit = null, star = null, onDrawn = null } = {}) {
  let c = container.__chart;
  if (!c) {
    c = chart(container, `Fleet map of ${type.instance_type}: ${type.nodes.length} nodes, one cell each, coloured by free GPUs`);
    container.__chart = c;
  }
  if (onDrawn) {
    const once = () => { c.off("finished", once); onDrawn(); };
    c.on("finished", once);
  }
  const big = type.nodes.length > BIG;
  const root = tree(type);
  const width = c.getWidth(), height = c.getHeight();
  const placed = layout(root, width, height, { big, star });
  const { domains, nodes, colours } = seriesData(placed, lit);
  // drawn at the size it was laid out for; a resize scales it until the next refresh lays it out again
  const scale = (api) => [api.getWidth() / width, api.getHeight() / height];
  const rect = (api, kx, ky) => ({ x: api.value(0) * kx, y: api.value(1) * ky, width: api.value(2) * kx, height: api.value(3) * ky });
  const tips = { domains: (i) => domainTip(placed.domains[i].d, jobs), nodes: (i) => nodeTip(placed.nodes[i].node, jobs) };
  c.setOption({
    animation: false,
    aria: { enabled: false },
    tooltip: { confine: true, formatter: (p) => (tips[p.seriesId] ? tips[p.seriesId](p.dataIndex) : ""), textStyle: { color: TEXT } },
    series: [
      {
        id: "domains", type: "custom", coordinateSystem: "none", progressive: 0, data: domains,
        renderItem: (params, api) => {
          const [kx, ky] = scale(api);
          const shape = rect(api, kx, ky);
          const header = api.value(4);
          const fill = colours[api.value(5)];
          if (!header) return { type: "rect", shape, style: { fill }, emphasisDisabled: true };
          const name = placed.domains[params.dataIndex];
          return {
            type: "rect", shape, style: { fill }, emphasisDisabled: true,
            textContent: { style: { text: name.starred ? `★ ${name.d.name}` : name.d.name, fill: "#ffffff", fontSize: 10, width: Math.max(0, shape.width - 6), overflow: "truncate" } },
            textConfig: { position: "insideTopLeft", distance: 3 },
          };
        },
      },
      {
        id: "nodes", type: "custom", coordinateSystem: "none", progressive: 0, data: nodes,
        renderItem: (params, api) => {
          const [kx, ky] = scale(api);
          const on = api.value(5) === 1;
          const style = { fill: colours[api.value(4)], stroke: on ? LIT : big ? null : "#ffffff", lineWidth: on ? (big ? 2 : 3) : big ? 0 : 0.5 };
          const out = { type: "rect", shape: rect(api, kx, ky), style, emphasisDisabled: true };
          if (big) return out;
          const n = placed.nodes[params.dataIndex].node;
          const light = !n.available || (n.gpus && n.free / n.gpus > 0.5) || (lit && lit.size > 0 && !on);
          out.textContent = { style: { text: `${n.free}`, fill: light ? "#111827" : "#ffffff", fontSize: 11 } };
          out.textConfig = { position: "inside" };
          return out;
        },
      },
    ],
  }, { replaceMerge: ["series"] });
  return c;
}

// What the map shows, for the tests and the benchmark: its node cells and the lit ones, read back
// from the chart's own data.
export function cellsOf(container) {
  const c = container.__chart;
  if (!c) return { cells: [], lit: [] };
  const series = c.getOption().series.find((s) => s.id === "nodes");
  const out = { cells: [], lit: [] };
  for (const d of (series && series.data) || []) {
    out.cells.push(d.name);
    if (d.value[5] === 1) out.lit.push(d.name);
  }
  return out;
}
