// What-if (admins): a job trace replayed under the policy in force and a proposed policy or fleet
// change, side by side (POST /v1/whatif). A member is told the API's answer (403).
import { api, Stale } from "./api.js";
import { chart, PALETTE, TEXT } from "./charts.js";
import { el, num, table } from "./util.js";

const EXAMPLE = `submit_s,team,name,pods,gpus_per_pod,instance_type,duration_s,topology_mode,topology_level,fallback_after_s,priority
0,team-a,a-1,4,8,p5.48xlarge,3600,required,layer-3,,
60,team-b,b-1,8,8,p5.48xlarge,1800,preferred,layer-2,,
120,team-c,c-1,2,8,p5.48xlarge,900,none,,,
`;

export function whatifPage(root) {
  const out = el("div", { id: "whatif-out", "aria-live": "polite" });
  const form = el("form", { class: "card whatif" },
    el("h2", {}, "Replay"),
    el("label", { for: "wi-trace" }, "Job trace (CSV, as topogov whatif reads it)"),
    el("textarea", { id: "wi-trace", rows: "6", spellcheck: "false", wrap: "off" }, EXAMPLE),
    el("label", { for: "wi-history" }, "… or the jobs submitted in the last (e.g. 7d; replaces the trace)"),
    el("input", { id: "wi-history", type: "text", placeholder: "7d" }),
    el("label", { for: "wi-fleet" }, "Fleet change (e.g. +p5.48xlarge=32, comma-separated)"),
    el("input", { id: "wi-fleet", type: "text", value: "+p5.48xlarge=8" }),
    el("label", { for: "wi-policy" }, "Proposed teams.yaml (empty: the policy in force)"),
    el("textarea", { id: "wi-policy", rows: "4", spellcheck: "false", wrap: "off" }),
    el("button", { type: "submit", class: "primary" }, "Compare"));
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const body = {};
    const history = form.querySelector("#wi-history").value.trim();
    if (history) body.history = history; else body.trace = form.querySelector("#wi-trace").value;
    const fleet = form.querySelector("#wi-fleet").value.split(",").map((s) => s.trim()).filter(Boolean);
    if (fleet.length) body.fleet_change = fleet;
    const policy = form.querySelector("#wi-policy").value;
    if (policy.trim()) body.policy = policy;
    out.replaceChildren(el("p", { class: "meta" }, "Replaying on the Kueue model …"));
    try {
      render(out, await api("POST", "/v1/whatif", body));
    } catch (e) {
      if (e instanceof Stale) return;
      out.replaceChildren(el("p", { class: "error" }, e.status === 403 ? `Not for you: ${e.message}` : `${e.code}: ${e.message}${e.details && e.details.field ? ` (${e.details.field})` : ""}`));
    }
  });
  root.replaceChildren(el("h1", {}, "What-if"),
    el("p", { class: "lead" }, "Admins: replay a job trace on the current fleet under the policy in force (baseline) and a proposed policy or fleet change, on the Kueue model."),
    el("div", { class: "whatif-grid" }, form, out));
  return null; // nothing to refresh: runs on demand
}

// The figures people compare first; every other number of the answer is under "all figures".
const KEY = ["jobs", "started", "never_started", "wait_p50_s", "wait_p95_s", "wait_max_s", "preemptions",
  "fallbacks", "gpus", "gpu_hours", "utilization", "bottom_domains", "free_whole_domains_mean"];

function rowsOf(names, get, keys) {
  return keys.map((k) => [k.replace(/_/g, " "), ...names.map((n) => num(get(n)[k], 2))]);
}

function render(host, doc) {
  const scenarios = doc.scenarios || {};
  const names = Object.keys(scenarios);
  const fleet = (n) => scenarios[n].fleet || {};
  const numeric = (get) => [...new Set(names.flatMap((n) => Object.keys(get(n))))].filter((k) => names.some((n) => typeof get(n)[k] === "number"));
  const all = numeric(fleet);
  const key = KEY.filter((k) => all.includes(k));
  const teams = [...new Set(names.flatMap((n) => Object.keys(scenarios[n].teams || {})))].sort();
  const team = (t) => (n) => (scenarios[n].teams || {})[t] || {};
  const chartHost = el("div", { class: "bars" });
  host.replaceChildren(el("section", { class: "card", "aria-labelledby": "wr-h" },
    el("h2", { id: "wr-h" }, `${doc.jobs} jobs: ${names.map((n) => `${n} on ${doc.nodes[n]} nodes`).join(" vs ")}`),
    table("The fleet", ["figure", ...names], rowsOf(names, fleet, key)),
    el("h3", {}, "Wait per team, p95 (s)"), chartHost,
    el("details", {}, el("summary", {}, "All figures, per team too"),
      table("The fleet", ["figure", ...names], rowsOf(names, fleet, all.filter((k) => !key.includes(k)))),
      ...teams.map((t) => table(t, ["figure", ...names], rowsOf(names, team(t), numeric(team(t))))))));
  chartHost.style.height = "220px";
  const c = chart(chartHost, `p95 wait per team, ${names.join(" vs ")}`);
  c.setOption({
    animation: false, color: PALETTE, aria: { enabled: false }, tooltip: { trigger: "axis" }, legend: { top: 0, textStyle: { color: TEXT } },
    grid: { left: 8, right: 16, top: 36, bottom: 8, containLabel: true },
    xAxis: { type: "category", data: teams, axisLabel: { color: TEXT } }, yAxis: { type: "value", axisLabel: { color: TEXT } },
    series: names.map((n) => ({ name: n, type: "bar", data: teams.map((t) => Math.round(team(t)(n).wait_p95_s ?? 0)) })),
  });
}
