// The fleet map: per GPU instance type, the network as nested domains (layer-1 > 2 > 3 [> 4] > node),
// one cell per node coloured by its free GPUs (an ECharts treemap, every node the same area).
// Shared by the fleet page and the job page (a job's nodes lit).
import { chart, TEXT } from "./charts.js";
import { esc, freeColour } from "./util.js";

const LIT = "#e11d48";
const STAR = "#f97316";

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

// The nested tree for one instance type, with per-domain statistics for the tooltips.
export function tree(type, jobs, lit, star, big = false) {
  const root = { children: new Map(), stats: domainStats() };
  for (const node of type.nodes) {
    const path = node.path && node.path.length ? node.path : ["(no topology labels)"];
    let at = root;
    const chain = [root];
    path.forEach((domain, depth) => {
      if (!at.children.has(domain)) at.children.set(domain, { name: domain, depth: depth + 1, children: new Map(), stats: domainStats() });
      at = at.children.get(domain);
      chain.push(at);
    });
    for (const d of chain) {
      d.stats.nodes += 1;
      d.stats.free += node.available ? node.free : 0;
      d.stats.freeNodes += node.available && node.free === node.gpus ? 1 : 0;
      d.stats.out += node.available ? 0 : 1;
      for (const j of node.jobs) d.stats.jobs.add(j);
    }
    at.children.set(`node:${node.name}`, { leaf: node });
  }
  const anyLit = lit && lit.size > 0;
  root.perLevel = [];
  const count = (d, depth) => {
    for (const c of d.children.values()) {
      if (c.leaf) continue;
      root.perLevel[depth] = (root.perLevel[depth] || 0) + 1;
      count(c, depth + 1);
    }
  };
  count(root, 0);
  const toData = (d) => {
    if (d.leaf) {
      const n = d.leaf;
      const on = anyLit && lit.has(n.name);
      const colour = freeColour(n.free, n.gpus, n.available);
      const light = n.available && n.gpus && n.free / n.gpus > 0.5;
      // as little per cell as will do: ECharts keeps a model per item that carries options
      const item = { name: n.name, value: 1, kind: "node", node: n, itemStyle: { color: anyLit && !on ? fade(colour) : colour } };
      if (on) Object.assign(item.itemStyle, { borderColor: LIT, borderWidth: 3 });
      if (!big) item.label = { color: light || (anyLit && !on) ? "#111827" : "#ffffff" };
      return item;
    }
    const starred = star && star.domain === d.name;
    return {
      name: starred ? `★ ${d.name}` : d.name, kind: "domain", depth: d.depth, stats: d.stats, domain: d.name,
      children: [...d.children.values()].map(toData),
      itemStyle: starred ? { borderColor: STAR, borderWidth: 4 } : undefined,
    };
  };
  const data = [...root.children.values()].map(toData);
  data.perLevel = root.perLevel;
  return data;
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

export function tooltip(jobs) {
  return (info) => {
    const d = info.data || {};
    if (d.kind === "node") {
      const n = d.node;
      const state = n.available ? `${n.free} of ${n.gpus} GPUs free` : "left out by Kueue (not Ready, cordoned or tainted)";
      const js = n.jobs.map((i) => `<br>${jobLine(jobs, i)}`).join("");
      return `<b>${esc(n.name)}</b><br>${state}${js}`;
    }
    if (d.kind === "domain") {
      const s = d.stats;
      const ids = [...s.jobs];
      const shown = ids.slice(0, 6).map((i) => `<br>${jobLine(jobs, i)}`).join("");
      const more = ids.length > 6 ? `<br>… and ${ids.length - 6} more jobs` : "";
      const out = s.out ? `<br>${s.out} node(s) left out by Kueue (not Ready, cordoned or tainted)` : "";
      return `<b>layer-${d.depth} ${esc(d.domain)}</b><br>${s.nodes} nodes · ${s.free} GPUs free · ${s.freeNodes} whole nodes free${out}` +
        (ids.length ? `<br><br>${ids.length} job(s) running:${shown}${more}` : "<br>no job running");
    }
    return "";
  };
}

// Draws (or redraws) the map of `type` into `container`; `lit` a Set of node names to light,
// `star` {level, domain} the domain to outline.
export function drawMap(container, type, jobs, { lit = null, star = null, onNode = null } = {}) {
  let c = container.__chart;
  if (!c) {
    c = chart(container, `Fleet map of ${type.instance_type}: ${type.nodes.length} nodes, one cell each, coloured by free GPUs`);
    container.__chart = c;
    if (onNode) c.on("click", (p) => p.data && p.data.kind === "node" && onNode(p.data.node));
  }
  const big = type.nodes.length > 400;
  const data = tree(type, jobs, lit, star, big);
  // a domain's name over it where there is room: at most 300 domains a layer (10,000 nodes have
  // 2,500 layer-3 domains: their names would cost seconds and could not be read)
  const named = (depth) => (data.perLevel[depth] || 0) <= 300;
  const border = ["#111827", "#374151", "#4b5563", "#6b7280"];
  const levels = [0, 1, 2, 3].map((depth) => ({
    itemStyle: { borderColor: border[depth], borderWidth: big ? Math.max(1, 3 - depth) : [3, 2, 1, 1][depth], gapWidth: big ? 0 : [3, 2, 1, 1][depth] },
    upperLabel: { show: named(depth) },
  }));
  levels.push({ itemStyle: { borderWidth: big ? 0 : 0.5, borderColor: "#ffffff", gapWidth: 0 } }); // the nodes
  c.setOption({
    aria: { enabled: false },
    tooltip: { confine: true, formatter: tooltip(jobs), textStyle: { color: TEXT } },
    series: [{
      type: "treemap", roam: false, nodeClick: false, animation: false,
      left: 0, right: 0, top: 0, bottom: 0, squareRatio: 1,
      breadcrumb: { show: false }, visibleMin: 0, childrenVisibleMin: 0,
      label: { show: !big, fontSize: 11, formatter: (p) => (p.data.kind === "node" ? `${p.data.node.free}` : "") },
      upperLabel: { show: true, height: 16, color: "#ffffff", fontSize: 10, overflow: "truncate", formatter: (p) => p.name },
      itemStyle: { borderColor: "#111827", gapWidth: 1 },
      levels,
      data,
    }],
  }, { replaceMerge: ["series"] });
  return c;
}

// What the map shows, for the tests and the benchmark: its node cells and the lit ones.
export function cellsOf(container) {
  const c = container.__chart;
  if (!c) return { cells: [], lit: [] };
  const out = { cells: [], lit: [] };
  const walk = (items) => {
    for (const d of items || []) {
      if (d.kind === "node") {
        out.cells.push(d.name);
        if (d.itemStyle && d.itemStyle.borderColor === LIT) out.lit.push(d.name);
      } else walk(d.children);
    }
  };
  walk(c.getOption().series[0].data);
  return out;
}
