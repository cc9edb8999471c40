// Fleet: per GPU instance type, the heat map of free GPUs over the nested network domains, the
// largest job that could start now per layer (its domain outlined), and the running jobs: clicking
// one lights exactly its nodes. One call per refresh: GET /v1/topology?view=capacity&nodes=true.
import { api } from "./api.js";
import { drawMap, fleetModel } from "./fleetmap.js";
import { el, num, table, SCALE_COLOURS } from "./util.js";

const state = { lit: null, litKey: null, star: {}, model: null, painted: false };

// A job's key across refreshes (the payload's list is rebuilt each time): its namespace and name;
// another team's job, shown without its name, by its place in the list.
const keyOf = (jobs, i) => (jobs[i].job ? `${jobs[i].namespace}/${jobs[i].job}` : `#${i}`);

export const FLEET_PATH = "/v1/topology?view=capacity&nodes=true";

export function legend() {
  return el("div", { class: "legend", "aria-label": "Colour scale" },
    el("span", {}, "busy"),
    ...SCALE_COLOURS.map((c) => el("span", { class: "swatch", style: `background:${c}` })),
    el("span", {}, "free"),
    el("span", { class: "swatch", style: "background:#9aa0a6" }), el("span", {}, "left out by Kueue"));
}

export function fleetPage(root) {
  root.replaceChildren(el("h1", {}, "Fleet"), el("p", { class: "lead" },
    "Free GPUs per node, nested by network domain (layer-1 \u2192 2 \u2192 3 [\u2192 4] \u2192 node), per GPU instance type, as of the last reconcile pass. Hover a cell or a domain for details."),
    legend(), el("div", { id: "fleet-types" }));
  state.painted = false;
  return async () => {
    const payload = await api("GET", FLEET_PATH);
    if (!state.painted) performance.mark("topogov:fleet-answer");
    state.model = fleetModel(payload);
    render(root.querySelector("#fleet-types"));
  };
}

function render(host) {
  const { types, jobs } = state.model;
  const index = state.litKey === null ? -1 : jobs.findIndex((_, i) => keyOf(jobs, i) === state.litKey);
  state.lit = index < 0 ? null : new Set(types.flatMap((t) => t.nodes.filter((n) => n.jobs.includes(index)).map((n) => n.name)));
  if (!types.length) {
    host.replaceChildren(el("p", { class: "empty" }, "No GPU node with a network topology yet: the reconcile pass writes the snapshot on its first run."));
    return;
  }
  // the first maps drawn (ECharts' "finished": every rectangle on the canvas), then two animation
  // frames later painted on the screen: the benchmark's "first meaningful paint"
  let pending = state.painted ? 0 : types.length;
  const drawn = state.painted ? null : () => {
    pending -= 1;
    if (pending) return;
    performance.mark("topogov:fleet-drawn");
    requestAnimationFrame(() => requestAnimationFrame(() => performance.mark("topogov:fleet-painted")));
  };
  state.painted = true;
  for (const type of types) {
    const id = `type-${type.instance_type.replace(/[^a-z0-9]/gi, "-")}`;
    let card = host.querySelector(`#${id}`);
    if (!card) {
      card = el("section", { class: "card", id, "aria-labelledby": `${id}-h` },
        el("h2", { id: `${id}-h` }, type.instance_type),
        el("p", { class: "summary" }),
        el("div", { class: "fleet-body" },
          el("div", { class: "map", "data-map": type.instance_type }),
          el("div", { class: "side" }, el("div", { class: "largest" }), el("div", { class: "jobs" }))));
      host.append(card);
    }
    const free = type.free_gpus ?? type.nodes.reduce((a, n) => a + n.free, 0);
    const total = type.nodes.reduce((a, n) => a + n.gpus, 0);
    card.querySelector(".summary").textContent =
      `${num(type.nodes.length)} nodes · ${num(free)} of ${num(total)} GPUs free · ${type.unavailable_nodes || 0} left out by Kueue`;
    if (!(type.instance_type in state.star)) {
      const levels = type.levels || [];
      const deepest = [...levels].reverse().find((l) => l.largest_now_domain);
      state.star[type.instance_type] = deepest ? deepest.level : null;
    }
    largest(card.querySelector(".largest"), type);
    jobList(card.querySelector(".jobs"), type, jobs);
    draw(card, type, jobs, drawn);
  }
}

function starOf(type) {
  const level = state.star[type.instance_type];
  const row = (type.levels || []).find((l) => l.level === level);
  return row && row.largest_now_domain ? { level, domain: row.largest_now_domain } : null;
}

function draw(card, type, jobs, onDrawn = null) {
  drawMap(card.querySelector(".map"), type, jobs, { lit: state.lit, star: starOf(type), onDrawn });
}

function largest(host, type) {
  const rows = (type.levels || []).map((l) => {
    const chosen = state.star[type.instance_type] === l.level;
    const button = el("button", {
      type: "button", class: chosen ? "pick on" : "pick", "aria-pressed": chosen ? "true" : "false",
      onclick: () => { state.star[type.instance_type] = chosen ? null : l.level; render(document.querySelector("#fleet-types")); },
    }, l.largest_now_domain ? `★ ${l.largest_now_domain}` : "none");
    return [el("span", { class: "nowrap" }, l.level), `${l.largest_now_nodes} of ${l.largest_empty_nodes}`, `${l.wholly_free} of ${l.domains}`, button];
  });
  host.replaceChildren(table("Largest job that could start now, in whole nodes (Kueue's BestFit)",
    ["layer", "nodes now / empty", "wholly free domains", "in domain"], rows));
}

function jobList(host, type, jobs) {
  const here = new Map();
  for (const n of type.nodes) for (const i of n.jobs) here.set(i, (here.get(i) || 0) + 1);
  const items = [...here.keys()].sort((a, b) => (jobs[b].gpus - jobs[a].gpus) || a - b);
  const list = el("ul", { class: "joblist" }, items.slice(0, 200).map((i) => {
    const j = jobs[i];
    const on = state.litKey === keyOf(jobs, i);
    return el("li", {}, el("button", {
      type: "button", class: on ? "job on" : "job", "aria-pressed": on ? "true" : "false", "data-job": j.job || "",
      "data-team": j.team,
      onclick: () => { state.litKey = on ? null : keyOf(jobs, i); render(document.querySelector("#fleet-types")); },
    }, el("span", { class: "team" }, j.team), " ", j.job ? j.job : el("i", {}, "another team's job"),
      el("span", { class: "meta" }, ` ${j.gpus} GPUs · ${j.nodes} nodes`)));
  }));
  const more = items.length > 200 ? el("p", { class: "meta" }, `… and ${items.length - 200} more`) : null;
  host.replaceChildren(...[el("h3", {}, `Running jobs (${items.length})`),
    items.length ? el("p", { class: "meta" }, "Select one to light its nodes.") : el("p", { class: "meta" }, "None at the last pass."),
    list, more].filter(Boolean));
}
