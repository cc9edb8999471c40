"""``topogov dashboard`` in a real browser (Debian's chromium, driven by Playwright) against a local
stack: the real command, serving the built page and signing its calls as an admin or as a member of
team-b; jobs Kueue really runs. Each page loads without a console error; the fleet map has one cell
per GPU node; clicking a job lights exactly the nodes its pods run on; a job submitted meanwhile
appears without a reload; a member sees other teams' jobs by team only; the pages fit 1280x800 and
390x844; axe-core finds no serious or critical accessibility violation.

Skipped, saying so, where chromium is not installed (``make install`` installs it where apt is)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.stacks import LABELER_FLEET, first_pass, pods_of, shared_stack, wait_until
from topogov_cli.sigv4 import credentials_for_profile, signed_request
from topogov_local import events
from topogov_local.lambda_context import LocalContext

CHROMIUM = "/usr/bin/chromium"
AXE = Path(__file__).resolve().parents[2] / "node_modules" / "axe-core" / "axe.min.js"
FLEET = LABELER_FLEET  # p5.48xlarge=16,p6-b200.48xlarge=2,c5.2xlarge=1: the labeler kind of tests/stacks.py
PAGES = {  # route -> what shows the page has drawn
    "#/fleet": "[data-map] canvas",
    "#/teams": "#usage canvas",
    "#/queue": "#queue :is(table, .empty)",
    "#/job": "#jobs table",
    "#/job/team-a/lit-a": "#job-map canvas",
    "#/whatif": "form.whatif",
}

pytestmark = pytest.mark.skipif(
    not Path(CHROMIUM).exists(),
    reason=f"the dashboard's browser tests need Debian's chromium at {CHROMIUM} "
    "(`make install` installs it where apt-get is; `apt-get install chromium`)",
)


def call(stack, method, path, profile, body=None):
    creds = credentials_for_profile(profile, str(stack.credentials))
    return signed_request(method, stack.api.url + path, credentials=creds, region="us-east-1", json_body=body)


def gpu_job(name, pods):
    return {"job_name": name, "image": "x", "accelerators": 8, "replica_count": pods,
            "topology": {"mode": "required", "level": "layer-3"}, "command": ["sleep", "3600"]}  # fmt: skip


def running(stack, team, name):
    return wait_until(
        lambda: (
            (v := call(stack, "GET", f"/v1/jobs/{team}/{name}", f"topogov-{team}").json())["status"]
            == "Running"
            and v["placement"]["placed"] == v["decision"]["pods"]
            and v
        ),
        f"{name} runs",
    )


@pytest.fixture(scope="module")
def stack(shared_stacks):
    """A local stack with one job of team-a running on two nodes, and a pass that saw it: the worker's
    stack of the labeler's kind (FLEET, an API reading the snapshot at every request), labelled."""
    from topogov.handlers.reconcile import handler

    with shared_stack(shared_stacks, "labeler") as s:
        first_pass(s)
        assert call(s, "POST", "/v1/jobs", "topogov-team-a", gpu_job("lit-a", 2)).status_code == 201
        running(s, "team-a", "lit-a")
        handler(events.scheduled_event(), LocalContext())  # the snapshot has it on its nodes
        yield s


def start_dashboard(stack, profile):
    """``topogov dashboard`` as a user runs it (a process of its own), refreshing every 3 s."""
    env = {**os.environ, "AWS_SHARED_CREDENTIALS_FILE": str(stack.credentials), "PYTHONUNBUFFERED": "1"}
    env.pop("AWS_ACCESS_KEY_ID", None)
    env.pop("AWS_SECRET_ACCESS_KEY", None)
    cmd = [sys.executable, "-m", "topogov_cli.main", "dashboard", "--endpoint", stack.api.url,
           "--profile", profile, "--refresh", "3"]  # fmt: skip
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()  # the URL first, or the command failed
    found = re.match(r"topogov dashboard: (http://127\.0\.0\.1:\d+/\?token=\S+)$", line.strip())
    if found is None:
        proc.kill()
        raise AssertionError(f"no URL from topogov dashboard: {line!r} {proc.communicate(timeout=10)}")
    return proc, found.group(1)


def stop(proc):
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)
    proc.stdout.close()
    proc.stderr.close()


@pytest.fixture(scope="module")
def admin_url(stack):
    proc, url = start_dashboard(stack, "topogov-admin")
    yield url
    stop(proc)


@pytest.fixture(scope="module")
def member_url(stack):
    proc, url = start_dashboard(stack, "topogov-team-b")
    yield url
    stop(proc)


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            yield b
        finally:
            b.close()


_SESSIONS: dict[str, dict] = {}


def logged_in(browser, url):
    """The browser state of a session the login link ``url`` opened: a link is good once, so each
    module's dashboard is logged in to once, and every page of its tests starts from that state."""
    if url not in _SESSIONS:
        context = browser.new_context()
        try:
            context.new_page().goto(url)  # the link sets the session cookie and lands on the fleet page
            _SESSIONS[url] = context.storage_state()
        finally:
            context.close()
    return _SESSIONS[url]


class Watched:
    """A page with its console errors and uncaught exceptions recorded."""

    def __init__(self, browser, url, **context):
        self.context = browser.new_context(storage_state=logged_in(browser, url), **context)
        self.page = self.context.new_page()
        self.errors = []
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.origin = url.split("/?", 1)[0]
        self.page.goto(self.origin + "/")  # the fleet page, in the session

    def open(self, route):
        """Another page of the app already loaded (a hash route, as its links do): no reload."""
        self.page.evaluate("(route) => { location.hash = route; }", route)
        self.page.wait_for_selector(PAGES.get(route, "main h1"), timeout=30_000)
        # a function, not an expression: the page's Content-Security-Policy forbids eval
        self.page.wait_for_function(
            "() => /^(updated|on demand)/.test(document.getElementById('status').textContent)"
        )
        return self.page

    def close(self):
        self.context.close()


@pytest.fixture
def admin(browser, admin_url):
    w = Watched(browser, admin_url, viewport={"width": 1280, "height": 800})
    yield w
    w.close()


@pytest.fixture
def member(browser, member_url):
    w = Watched(browser, member_url, viewport={"width": 1280, "height": 800})
    yield w
    w.close()


def test_every_page_loads_without_a_console_error(admin):
    for route in PAGES:
        admin.open(route)
    page = admin.page
    page.click("form.whatif button[type=submit]")  # an admin's replay, side by side
    page.wait_for_selector("#whatif-out table", timeout=60_000)
    assert "baseline" in page.inner_text("#whatif-out") and "proposed" in page.inner_text("#whatif-out")
    assert admin.errors == []


def gpu_nodes(stack):
    items = stack.kube().request("GET", "/api/v1/nodes").body["items"]
    return sorted(
        n["metadata"]["name"]
        for n in items
        if int((n.get("status") or {}).get("allocatable", {}).get("nvidia.com/gpu", "0")) > 0
    )


def test_the_fleet_map_has_one_cell_per_gpu_node(admin, stack):
    page = admin.open("#/fleet")
    maps = page.evaluate("window.topogov.fleetCells()")
    assert {m["type"] for m in maps} == {"p5.48xlarge", "p6-b200.48xlarge"}
    cells = [c for m in maps for c in m["cells"]]
    assert sorted(cells) == gpu_nodes(stack)  # one each: no node twice, none missing
    assert admin.errors == []


def test_clicking_a_job_lights_exactly_its_nodes(admin, stack):
    nodes = {p["spec"]["nodeName"] for p in pods_of(stack, "hyperpod-ns-team-a", "lit-a")}
    assert len(nodes) == 2
    page = admin.open("#/fleet")
    assert all(not m["lit"] for m in page.evaluate("window.topogov.fleetCells()"))
    page.click("button.job[data-job='lit-a']")
    page.wait_for_selector("button.job.on[data-job='lit-a']")
    lit = [c for m in page.evaluate("window.topogov.fleetCells()") for c in m["lit"]]
    assert sorted(lit) == sorted(nodes)
    page.click("button.job[data-job='lit-a']")  # again: lights off
    page.wait_for_selector("button.job.on", state="detached")
    assert all(not m["lit"] for m in page.evaluate("window.topogov.fleetCells()"))
    # the job's own page lights the same nodes, from its pods as the API reads them
    page = admin.open("#/job/team-a/lit-a")
    page.wait_for_function("() => window.topogov.jobCells().lit.length > 0")
    assert sorted(page.evaluate("window.topogov.jobCells().lit")) == sorted(nodes)
    assert "layer-3 ×1" in page.inner_text("#job-head")
    assert admin.errors == []


def test_a_job_submitted_meanwhile_appears_without_a_reload(admin, stack):
    page = admin.open("#/job")
    page.evaluate("window.__same_document = true")
    before = page.evaluate("window.topogov.calls.count")
    assert call(stack, "POST", "/v1/jobs", "topogov-team-b", gpu_job("fresh-b", 1)).status_code == 201
    page.wait_for_selector("#jobs a:text-is('fresh-b')", timeout=30_000)
    assert page.evaluate("window.__same_document") is True  # the same page: no reload
    assert page.evaluate("window.topogov.calls.count") > before
    assert admin.errors == []


def test_a_member_sees_other_teams_jobs_by_team_only(member):
    page = member.open("#/fleet")
    page.wait_for_selector("button.job[data-team='team-a']")
    assert page.inner_text("button.job[data-team='team-a']").startswith("team-a another team's job")
    assert "lit-a" not in page.content()
    payload = page.evaluate("window.topogov.api('GET', '/v1/topology?view=capacity&nodes=true')")
    assert [j["job"] for j in payload["jobs"] if j["team"] == "team-a"] == [None]
    page = member.open("#/job")
    assert "lit-a" not in page.content()
    assert member.errors == []
    # another team's job page is the API's 403, said on the page
    member.page.evaluate("() => { location.hash = '#/job/team-a/lit-a'; }")
    member.page.wait_for_selector("#banner:not([hidden])")
    assert "not a principal of team 'team-a'" in member.page.inner_text("#banner")


@pytest.mark.parametrize("size", [(1280, 800), (390, 844)], ids=["desktop", "phone"])
def test_every_page_fits_the_screen(browser, admin_url, size):
    width, height = size
    w = Watched(browser, admin_url, viewport={"width": width, "height": height})
    try:
        for route in PAGES:
            page = w.open(route)
            wide = page.evaluate("document.documentElement.scrollWidth")
            assert wide <= width, f"{route}: the page is {wide} px wide on a {width} px screen"
            for link in page.query_selector_all("nav a"):
                box = link.bounding_box()
                assert box and box["x"] >= 0 and box["x"] + box["width"] <= width, route
        page = w.open("#/fleet")
        box = page.query_selector("[data-map]").bounding_box()
        assert box["width"] >= min(width - 60, 600) and box["height"] >= 250, box
        page.click("nav a[data-page='teams']")
        page.wait_for_selector("h1:text-is('Teams')")
        assert w.errors == []
    finally:
        w.close()


def test_axe_finds_no_serious_accessibility_violation(browser, admin_url):
    if not AXE.exists():
        pytest.skip(f"axe-core is not installed ({AXE}): `make install` (npm ci) brings it")
    # axe is injected as a script of the test's own: the page's Content-Security-Policy (scripts from
    # the dashboard only) would refuse it, so this context alone bypasses it
    w = Watched(browser, admin_url, viewport={"width": 1280, "height": 800}, bypass_csp=True)
    try:
        found = {}
        for route in PAGES:
            page = w.open(route)
            page.add_script_tag(path=str(AXE))
            result = page.evaluate("axe.run(document, {resultTypes: ['violations']})")
            bad = [v for v in result["violations"] if v["impact"] in ("serious", "critical")]
            if bad:
                found[route] = [(v["id"], v["help"], [n["target"] for n in v["nodes"][:3]]) for v in bad]
        assert found == {}
    finally:
        w.close()
