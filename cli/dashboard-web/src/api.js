// The page's calls: all to this server's /api/ (the local proxy signs and forwards them), and the
// refresh loop: one request at a time per view, the next one `refresh_s` after the previous answer,
// paused while the tab is hidden, backing off (doubling, at most 2 min) while the API fails.

export class ApiError extends Error {
  constructor(status, code, message, details) {
    super(message);
    this.status = status;
    this.code = code;
    this.details = details || {};
  }
}

export const calls = { count: 0, byPath: {} }; // for the benchmark and the tests: calls made

// An answer that comes back after the user moved to another page is dropped, never drawn there.
let generation = 0;
export class Stale extends Error {}
export function newPage() {
  generation += 1;
}

export async function api(method, path, body) {
  const asked = generation;
  calls.count += 1;
  const key = `${method} ${path.split("?")[0]}`;
  calls.byPath[key] = (calls.byPath[key] || 0) + 1;
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), 60000);
  let resp;
  try {
    resp = await fetch(`/api${path}`, {
      method,
      headers: body === undefined ? {} : { "Content-Type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: controller.signal,
      credentials: "same-origin",
    });
  } catch (e) {
    throw new ApiError(0, "UNREACHABLE", `the dashboard server did not answer (${e.name === "AbortError" ? "timed out" : e.message}); is topogov dashboard still running?`);
  } finally {
    clearTimeout(timer);
  }
  let doc = null;
  try {
    doc = await resp.json();
  } catch (e) {
    doc = null;
  }
  if (asked !== generation) throw new Stale("an answer for a page no longer shown");
  if (!resp.ok) {
    const err = (doc && doc.error) || {};
    const message = err.message || (doc && doc.message) || `HTTP ${resp.status}`;
    throw new ApiError(resp.status, err.code || "ERROR", message, err.details);
  }
  return doc;
}

export async function info() {
  const resp = await fetch("/_dashboard/info", { credentials: "same-origin" });
  if (!resp.ok) {
    let message = `HTTP ${resp.status}`;
    try { message = (await resp.json()).error.message; } catch (e) { /* keep the status */ }
    throw new ApiError(resp.status, "NO_SESSION", message);
  }
  return resp.json();
}

// A view's refresh loop. `load()` fetches and renders; returns a stop function.
export function live(load, everyMs, onState) {
  let stopped = false;
  let timer = null;
  let running = false;
  let failures = 0;
  const schedule = (ms) => {
    clearTimeout(timer);
    if (!stopped) timer = setTimeout(tick, ms);
  };
  async function tick() {
    if (stopped || running) return;
    if (document.hidden) return; // resumed by visibilitychange
    running = true;
    try {
      await load();
      if (stopped) return;
      failures = 0;
      onState({ ok: true, at: new Date() });
    } catch (e) {
      if (stopped || e instanceof Stale) return;
      failures += 1;
      onState({ ok: false, error: e, at: new Date() });
    } finally {
      running = false;
    }
    const wait = failures ? Math.min(120000, everyMs * 2 ** failures) : everyMs;
    schedule(wait);
  }
  const visibility = () => {
    if (!document.hidden && !running) schedule(0);
    else if (document.hidden) clearTimeout(timer);
  };
  document.addEventListener("visibilitychange", visibility);
  schedule(0);
  return () => {
    stopped = true;
    clearTimeout(timer);
    document.removeEventListener("visibilitychange", visibility);
  };
}

// Every job of GET /v1/jobs, page after page (its nextToken): the API answers at most 500 a page.
export async function allJobs() {
  const jobs = [];
  let token = null;
  do {
    const query = token ? `?limit=500&nextToken=${encodeURIComponent(token)}` : "?limit=500";
    const page = await api("GET", `/v1/jobs${query}`);
    jobs.push(...(page.jobs || []));
    token = page.nextToken;
  } while (token);
  return { jobs };
}
