// Small helpers shared by the pages: escaping, elements, numbers.

export function esc(text) {
  return String(text ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}

// el("div", {class: "x", onclick: f}, child, "text", ...)
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") node.addEventListener(k.slice(2), v);
    else if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else node.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

export function table(caption, headers, rows, opts = {}) {
  const t = el("table", { class: opts.class || "grid" });
  if (caption) t.append(el("caption", {}, caption));
  t.append(el("thead", {}, el("tr", {}, headers.map((h) => el("th", { scope: "col" }, h)))));
  const body = el("tbody");
  for (const r of rows) body.append(r instanceof Node ? r : el("tr", {}, r.map((c) => el("td", {}, c))));
  t.append(body);
  return el("div", { class: "table-wrap" }, t);
}

export function duration(seconds) {
  if (seconds === null || seconds === undefined) return "-";
  const s = Math.max(0, Math.round(seconds));
  const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), r = s % 60;
  return (h ? `${h}h` : "") + (m ? `${m}m` : "") + (!h && (r || !m) ? `${r}s` : "") || "0s";
}

export function pct(x) {
  return x === null || x === undefined ? "-" : `${Math.round(x * 100)} %`;
}

export function num(x, digits = 1) {
  if (typeof x !== "number") return String(x ?? "-");
  return Number.isInteger(x) ? x.toLocaleString("en") : x.toLocaleString("en", { maximumFractionDigits: digits });
}

export function levelName(level) {
  if (!level) return "-";
  return String(level).replace("topology.k8s.aws/network-node-", "").replace("kubernetes.io/hostname", "hostname");
}

export function topologyText(topo) {
  if (!topo || !topo.mode || topo.mode === "none") return "none";
  return `${topo.mode} ${levelName(topo.level)}`;
}

export const GPU = "nvidia.com/gpu";

// Free GPUs as a colour: a sequential scale (cividis-like: dark blue = busy, yellow = free), readable
// for colour-blind eyes; a node Kueue leaves out is grey.
const SCALE = ["#00204d", "#31446b", "#666970", "#958f78", "#cbba69", "#ffea46"];
export function freeColour(free, gpus, available) {
  if (!available) return "#9aa0a6";
  if (!gpus) return SCALE[0];
  const x = Math.max(0, Math.min(1, free / gpus));
  return SCALE[Math.round(x * (SCALE.length - 1))];
}
export const SCALE_COLOURS = SCALE;
