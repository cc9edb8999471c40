// Teams: quota, borrowing limit, in flight, admitted and borrowed GPUs as bars; the placement quality
// per layer (the team's beside the fleet's); each team's pending jobs.
// Calls per refresh: GET /v1/teams, GET /v1/jobs.
import { allJobs, api } from "./api.js";
import { chart, PALETTE, TEXT } from "./charts.js";
import { el, GPU, num, pct, table, topologyText } from "./util.js";

export function teamsPage(root) {
  root.replaceChildren(el("h1", {}, "Teams"),
    el("p", { class: "lead" }, "GPUs per team: the quota and what may be borrowed beyond it, what is in flight (queued + running, as the API counts it) and what Kueue has admitted."),
    el("section", { class: "card", "aria-labelledby": "usage-h" }, el("h2", { id: "usage-h" }, "GPUs by team"), el("div", { class: "bars", id: "usage" })),
    el("section", { class: "card", "aria-labelledby": "quality-h" }, el("h2", { id: "quality-h" }, "Placement quality"),
      el("p", { class: "meta" }, "Share of running multi-pod jobs whose pods all sit in one domain of the layer, at the last reconcile pass."),
      el("div", { class: "bars", id: "quality" })),
    el("section", { class: "card", "aria-labelledby": "pending-h" }, el("h2", { id: "pending-h" }, "Pending jobs"), el("div", { id: "pending" })));
  return async () => {
    const [teams, jobs] = await Promise.all([api("GET", "/v1/teams"), allJobs()]);
    usage(root.querySelector("#usage"), teams.teams || []);
    quality(root.querySelector("#quality"), teams.teams || []);
    pending(root.querySelector("#pending"), jobs.jobs || []);
  };
}

function usage(host, teams) {
  const names = teams.map((t) => t.team);
  const g = (t, k) => (t[k] || {})[GPU] || 0;
  const c = host.__chart || (host.__chart = chart(host, `GPUs by team: quota, borrow limit, in flight, admitted, borrowed, for ${names.join(", ")}`));
  host.style.height = `${Math.max(220, 70 * names.length + 90)}px`;
  c.resize();
  const series = [
    ["quota", (t) => g(t, "quota")],
    ["borrow limit", (t) => g(t, "borrow_limit")],
    ["in flight", (t) => g(t, "in_flight")],
    ["admitted", (t) => g(t, "admitted")],
    ["borrowed", (t) => Math.max(0, g(t, "admitted") - g(t, "quota"))],
  ];
  c.setOption({
    animation: false, aria: { enabled: false }, color: PALETTE,
    tooltip: { trigger: "axis", axisPointer: { type: "shadow" } },
    legend: { top: 0, textStyle: { color: TEXT } },
    grid: { left: 8, right: 48, top: 36, bottom: 24, containLabel: true },
    xAxis: { type: "value", name: "GPUs", nameLocation: "middle", nameGap: 24, nameTextStyle: { color: TEXT }, axisLabel: { color: TEXT } },
    yAxis: { type: "category", data: names, inverse: true, axisLabel: { color: TEXT } },
    series: series.map(([name, f]) => ({ name, type: "bar", data: teams.map(f), label: { show: true, position: "right", color: TEXT, fontSize: 10 } })),
  }, { replaceMerge: ["series", "yAxis"] });
}

function quality(host, teams) {
  const withData = teams.filter((t) => t.placement);
  if (!withData.length) {
    host.replaceChildren(el("p", { class: "empty" }, "No running multi-pod job at the last pass."));
    host.__chart && host.__chart.dispose();
    host.__chart = null;
    return;
  }
  const fleet = withData[0].placement.fleet.in_one_domain || {};
  const layers = Object.keys(fleet).length ? Object.keys(fleet) : ["layer-1", "layer-2", "layer-3"];
  const c = host.__chart || (host.__chart = chart(host, "Placement quality per layer: each team's share of jobs in one domain beside the fleet's"));
  host.style.height = "260px";
  c.resize();
  const series = withData.map((t) => ({ name: `${t.team} (${t.placement.team.jobs} jobs)`, type: "bar", data: layers.map((l) => Math.round(100 * (t.placement.team.in_one_domain[l] ?? 0))) }));
  series.push({ name: `fleet (${withData[0].placement.fleet.jobs} jobs)`, type: "bar", data: layers.map((l) => Math.round(100 * (fleet[l] ?? 0))) });
  c.setOption({
    animation: false, aria: { enabled: false }, color: PALETTE,
    tooltip: { trigger: "axis", valueFormatter: (v) => `${v} %` },
    legend: { top: 0, textStyle: { color: TEXT } },
    grid: { left: 8, right: 16, top: 40, bottom: 8, containLabel: true },
    xAxis: { type: "category", data: layers, axisLabel: { color: TEXT } },
    yAxis: { type: "value", max: 100, name: "% in one domain", nameTextStyle: { color: TEXT }, axisLabel: { color: TEXT } },
    series,
  }, { replaceMerge: ["series", "xAxis"] });
}

function pending(host, jobs) {
  const waiting = jobs.filter((j) => j.status === "Pending");
  if (!waiting.length) {
    host.replaceChildren(el("p", { class: "empty" }, "No pending job in your teams."));
    return;
  }
  host.replaceChildren(table(null, ["team", "job", "priority", "topology", "waiting since"],
    waiting.map((j) => [j.team, el("a", { href: `#/job/${encodeURIComponent(j.team)}/${encodeURIComponent(j.name)}` }, j.name),
      j.priority_class || "-", topologyText(j.topology), j.submitted_at || "-"])));
}

export { num, pct };
