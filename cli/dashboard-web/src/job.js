// Jobs: the caller's jobs (GET /v1/jobs); one job (GET /v1/jobs/{team}/{name}): status and
// lifecycle, the verdict, its pods lit on the fleet map (GET /v1/topology?view=capacity&nodes=true),
// Kueue's events; while it waits, the closest domain and the start estimate.
import { allJobs, api } from "./api.js";
import { FLEET_PATH, legend } from "./fleet.js";
import { drawMap, fleetModel } from "./fleetmap.js";
import { closest } from "./queue.js";
import { duration, el, levelName, table, topologyText } from "./util.js";

export function jobsPage(root) {
  root.replaceChildren(el("h1", {}, "Jobs"), el("p", { class: "lead" }, "Your teams' jobs (an admin sees every team's). Open one to see where its pods run."), el("div", { id: "jobs" }));
  return async () => {
    const jobs = (await allJobs()).jobs;
    root.querySelector("#jobs").replaceChildren(jobs.length ? table(null, ["team", "job", "kind", "status", "topology", "placement", "submitted"],
      jobs.map((j) => [j.team, el("a", { href: `#/job/${encodeURIComponent(j.team)}/${encodeURIComponent(j.name)}` }, j.name),
        j.kind || "Job", status(j.status), topologyText(j.topology), j.placement || "-", j.submitted_at || "-"]))
      : el("p", { class: "empty" }, "No job yet: topogov submit ..."));
  };
}

function status(s) {
  return el("span", { class: `badge ${String(s).toLowerCase()}` }, s);
}

export function jobPage(root, team, name) {
  root.replaceChildren(el("p", { class: "crumbs" }, el("a", { href: "#/job" }, "Jobs"), " / ", team, " / "),
    el("h1", {}, name), el("div", { id: "job-head" }),
    el("section", { class: "card", "aria-labelledby": "map-h" }, el("h2", { id: "map-h" }, "Where its pods run"), el("p", { class: "meta", id: "map-note" }), legend(), el("div", { class: "map", id: "job-map" })),
    el("div", { id: "job-waiting" }),
    el("section", { class: "card", "aria-labelledby": "ev-h" }, el("h2", { id: "ev-h" }, "Events"), el("div", { id: "job-events" })));
  const path = `/v1/jobs/${encodeURIComponent(team)}/${encodeURIComponent(name)}`;
  return async () => {
    const [job, fleet] = await Promise.all([api("GET", path), api("GET", FLEET_PATH)]);
    head(root.querySelector("#job-head"), job);
    map(root, job, fleetModel(fleet));
    const waiting = root.querySelector("#job-waiting");
    waiting.replaceChildren(job.status === "Pending"
      ? el("section", { class: "card", "aria-labelledby": "w-h" }, el("h2", { id: "w-h" }, "Why it waits"), el("p", {}, job.why_pending || "Kueue has not said yet."), closest(job))
      : "");
    root.querySelector("#job-events").replaceChildren((job.events || []).length
      ? table(null, ["at", "what", "detail"], job.events.map((e) => [e.at || "-", e.what || e.reason || "-", e.message || (e.topology ? topologyText(e.topology) : "")]))
      : el("p", { class: "empty" }, "No event yet."));
  };
}

// "4 pods", or per pod set for a job of several: "4 pods (master 1 × 8 GPUs, worker 3 × 8 GPUs)"
function podsText(d) {
  const sets = d.pod_sets || [];
  const all = `${d.pods ?? "?"} pods`;
  return sets.length < 2 ? all : `${all} (${sets.map((p) => `${p.name} ${p.pods} × ${p.gpus_per_pod} GPUs`).join(", ")})`;
}

function head(host, job) {
  const d = job.decision || {};
  const p = job.placement || {};
  const facts = [
    ["status", status(job.status)],
    ["team", job.team],
    ["kind", d.kind || job.kind || "batch/v1 Job"],
    ["asked", `${podsText(d)} · ${topologyText(d.topology)}`],
    ["verdict", p.verdict || "-"],
    ["tightest", p.tightest ? `${levelName(p.tightest.level)} ${p.tightest.domain}` : "-"],
    ["submitted", `${job.submitted_at || "-"} by ${job.submitted_by || "-"}`],
    ["ran", job.ran_s ? duration(job.ran_s) : "-"],
  ];
  host.replaceChildren(el("dl", { class: "facts" }, facts.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)])));
}

function map(root, job, model) {
  const nodes = new Set(((job.placement || {}).by_node || []).map((r) => r.node));
  const type = model.types.find((t) => t.nodes.some((n) => nodes.has(n.name)))
    || model.types.find((t) => t.instance_type === ((job.decision || {}).instance_type)) || model.types[0];
  const note = root.querySelector("#map-note");
  const host = root.querySelector("#job-map");
  if (!type) {
    note.textContent = "No fleet snapshot yet.";
    return;
  }
  note.textContent = nodes.size
    ? `${nodes.size} node(s) of ${type.instance_type} lit; the rest dimmed.`
    : `No pod placed yet; the ${type.instance_type} fleet as it is.`;
  drawMap(host, type, model.jobs, { lit: nodes });
}
