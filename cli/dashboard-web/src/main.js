// The dashboard: a page per view (hash routes), each refreshed on its own (api.js: one request at a
// time per view, every `refresh_s` while the tab is visible, backing off while the API fails).
import { api, calls, info, live, newPage } from "./api.js";
import { disposeAll } from "./charts.js";
import { fleetPage } from "./fleet.js";
import { cellsOf } from "./fleetmap.js";
import { jobPage, jobsPage } from "./job.js";
import { queuePage } from "./queue.js";
import { teamsPage } from "./teams.js";
import { whatifPage } from "./whatif.js";

const main = document.getElementById("main");
const banner = document.getElementById("banner");
const status = document.getElementById("status");
let stop = null;
let current = null;
let refreshMs = 10000;

function route() {
  const parts = (location.hash.replace(/^#\/?/, "") || "fleet").split("/").map(decodeURIComponent);
  const page = parts[0];
  for (const a of document.querySelectorAll("nav a")) {
    if (a.dataset.page === page) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  if (stop) stop();
  stop = null;
  newPage();
  disposeAll();
  banner.hidden = true;
  let load;
  if (page === "teams") load = teamsPage(main);
  else if (page === "queue") load = queuePage(main);
  else if (page === "job" && parts.length >= 3) load = jobPage(main, parts[1], parts[2]);
  else if (page === "job") load = jobsPage(main);
  else if (page === "whatif") load = whatifPage(main);
  else load = fleetPage(main);
  document.title = `Topogov · ${page === "job" && parts[2] ? parts[2] : page}`;
  current = null;
  if (!load) {
    status.textContent = "on demand";
    return;
  }
  current = load;
  status.textContent = "loading…";
  stop = live(load, refreshMs, shown);
}

// A page asks for an immediate refresh (the queue, when another job is selected).
main.addEventListener("refresh", () => {
  if (!current) return;
  if (stop) stop();
  stop = live(current, refreshMs, shown);
});

function shown(s) {
  const at = s.at.toLocaleTimeString("en-GB");
  if (s.ok) {
    banner.hidden = true;
    status.textContent = `updated ${at} · every ${refreshMs / 1000} s`;
  } else {
    banner.hidden = false;
    const e = s.error;
    banner.textContent = e.status === 403 ? `The API refused: ${e.message}` : `${e.code || "Error"}: ${e.message}`;
    status.textContent = `failed at ${at}; retrying with back-off`;
  }
}

// For the tests and the benchmark: what the pages show, read from the page itself.
window.topogov = {
  calls,
  fleetCells: () => [...document.querySelectorAll("[data-map]")].map((m) => ({ type: m.dataset.map, ...cellsOf(m) })),
  jobCells: () => cellsOf(document.getElementById("job-map") || document.createElement("div")),
  api,
};

async function start() {
  try {
    const i = await info();
    refreshMs = Math.max(2000, (i.refresh_s || 10) * 1000);
    document.getElementById("who").textContent = `Topogov API ${i.endpoint} · signed as ${i.signed_as || "your default AWS credentials"} · the page shows what the API shows you`;
  } catch (e) {
    banner.hidden = false;
    banner.textContent = e.message;
    status.textContent = "no session";
    return;
  }
  window.addEventListener("hashchange", route);
  route();
}

start();
