// Queue: the pending jobs with Kueue's reason and the start estimate (GET /v1/jobs), and for the
// selected one the domain that comes closest and what blocks it (GET /v1/jobs/{team}/{name}).
import { allJobs, api } from "./api.js";
import { duration, el, levelName, table, topologyText } from "./util.js";

const state = { selected: null };

export function queuePage(root) {
  root.replaceChildren(el("h1", {}, "Queue"),
    el("p", { class: "lead" }, "Jobs waiting for Kueue, oldest first: Kueue's reason, and when the Kueue model expects each to start."),
    el("section", { class: "card", "aria-labelledby": "q-h" }, el("h2", { id: "q-h" }, "Pending"), el("div", { id: "queue" })),
    el("section", { class: "card", "aria-labelledby": "c-h" }, el("h2", { id: "c-h" }, "Closest domain"), el("div", { id: "closest" })));
  return async () => {
    const jobs = (await allJobs()).jobs;
    const waiting = jobs.filter((j) => j.status === "Pending").sort((a, b) => String(a.submitted_at).localeCompare(String(b.submitted_at)));
    const key = (j) => `${j.team}/${j.name}`;
    if (!waiting.some((j) => key(j) === state.selected)) state.selected = waiting.length ? key(waiting[0]) : null;
    const rows = waiting.map((j) => {
      const chosen = key(j) === state.selected;
      return el("tr", { class: chosen ? "chosen" : "" },
        el("td", {}, j.team),
        el("td", {}, el("button", { type: "button", class: "linkish", "aria-pressed": chosen ? "true" : "false", onclick: () => { state.selected = key(j); root.dispatchEvent(new Event("refresh")); } }, j.name)),
        el("td", {}, j.priority_class || "-"),
        el("td", {}, topologyText(j.topology)),
        el("td", { class: "why" }, j.why_pending || "-"),
        el("td", {}, eta(j.eta)));
    });
    root.querySelector("#queue").replaceChildren(waiting.length
      ? table(null, ["team", "job", "priority", "topology", "Kueue's reason", "start estimate"], rows)
      : el("p", { class: "empty" }, "Nothing is waiting."));
    const host = root.querySelector("#closest");
    if (!state.selected) {
      host.replaceChildren(el("p", { class: "empty" }, "No pending job selected."));
      return;
    }
    const [team, name] = state.selected.split("/");
    const job = await api("GET", `/v1/jobs/${encodeURIComponent(team)}/${encodeURIComponent(name)}`);
    host.replaceChildren(closest(job));
  };
}

function eta(e) {
  if (!e) return "-";
  if (e.start_in_s === null || e.start_in_s === undefined) return e.error || "unknown";
  return e.start_in_s <= 0 ? "now" : `in ${duration(e.start_in_s)}`;
}

export function closest(job) {
  const w = job.waiting;
  const title = el("p", {}, el("b", {}, `${job.team}/${job.name}`), ` (${topologyText(job.decision && job.decision.topology)})`,
    el("a", { href: `#/job/${encodeURIComponent(job.team)}/${encodeURIComponent(job.name)}`, class: "more" }, "open the job"));
  if (!w) return el("div", {}, title, el("p", { class: "empty" }, "No closest domain: the job asked for no topology level, or no domain could ever hold it."));
  const who = (o) => (o.job ? `${o.team}/${o.job}` : `${o.team} (another team's job)`);
  const occupants = (w.occupants || []).map((o) => [who(o), o.priority_class || "-", `${o.gpus}`, `${o.nodes}`]);
  const verdict = w.to_free === null
    ? "Finishing or preempting what runs there would still not make room."
    : `To start there: ${w.to_free.map((o) => `${who(o)} ${o.lower_priority ? "(preemptible: lower priority)" : "(must finish)"}`).join(", ") || "nothing has to go"}.`;
  return el("div", {}, title,
    el("p", {}, `${levelName(w.level)} domain `, el("code", {}, w.domain), `: ${w.pods_now} of ${w.pods} pods fit now on its ${w.nodes} nodes${w.unavailable_nodes ? ` (${w.unavailable_nodes} left out by Kueue)` : ""}.`),
    occupants.length ? table("Running there", ["job", "priority", "GPUs", "nodes"], occupants) : null,
    el("p", {}, verdict),
    job.estimate ? el("p", {}, `Start estimate: ${eta(job.estimate)}`) : null);
}
