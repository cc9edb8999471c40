"""``make screenshots``: a picture of each dashboard page (docs/dashboard-*.png, shown by the README and
docs/dashboard.md), taken by headless chromium (Debian's, driven by Playwright) from ``topogov
dashboard`` in front of a local stack where Kueue runs a few jobs of three teams and one waits.

``python -m topogov_local.screenshots DIR``; about a minute and a half on 2 cores."""

from __future__ import annotations

import functools
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

CHROMIUM = "/usr/bin/chromium"
FLEET = "p5.48xlarge=32,p6-b200.48xlarge=4"  # two layer-2 domains of 16 p5 nodes, 8 layer-3 of 4
JOBS = [  # (team, name, pods of 8 GPUs, topology, priority class)
    ("team-a", "llm-pretrain", 12, {"mode": "required", "level": "layer-2"}, "training-priority"),
    ("team-a", "eval-7b", 2, {"mode": "required", "level": "layer-3"}, None),
    ("team-b", "vision-ft", 4, {"mode": "required", "level": "layer-3"}, "training-priority"),
    ("team-b", "ablation-3", 3, {"mode": "preferred", "level": "layer-3"}, None),
    ("team-c", "rl-sweep", 6, {"mode": "preferred", "level": "layer-3"}, "training-priority"),
]
WAITS = ("team-b", "moe-large", 16, {"mode": "required", "level": "layer-2"}, "training-priority")
SHOTS = [  # (file, route, what shows it is drawn, an action before the picture)
    ("dashboard-fleet.png", "#/fleet", "[data-map] canvas", "button.job[data-job='llm-pretrain']"),
    ("dashboard-teams.png", "#/teams", "#usage canvas", None),
    ("dashboard-queue.png", "#/queue", "#closest table", None),
    ("dashboard-job.png", "#/job/team-a/llm-pretrain", "#job-map canvas", None),
    ("dashboard-whatif.png", "#/whatif", "form.whatif", "form.whatif button[type=submit]"),
]


def call(stack: Any, method: str, path: str, profile: str, body: Any = None) -> Any:
    from topogov_cli.sigv4 import credentials_for_profile, signed_request

    creds = credentials_for_profile(profile, str(stack.credentials))
    return signed_request(method, stack.api.url + path, credentials=creds, region="us-east-1", json_body=body)


def submit(
    stack: Any, team: str, name: str, pods: int, topology: dict[str, str], priority: str | None
) -> None:
    body: dict[str, Any] = {"job_name": name, "image": "x", "accelerators": 8, "replica_count": pods,
                            "topology": topology, "command": ["sleep", "36000"]}  # fmt: skip
    if priority:
        body["priority"] = priority
    resp = call(stack, "POST", "/v1/jobs", f"topogov-{team}", body)
    if resp.status_code != 201:
        raise RuntimeError(f"submitting {team}/{name}: HTTP {resp.status_code} {resp.text[:300]}")


def settle(stack: Any) -> None:
    """Until every job of ``JOBS`` runs with all its pods placed, then one reconcile pass."""
    from topogov.handlers.reconcile import handler
    from topogov_local import events
    from topogov_local.lambda_context import LocalContext
    from topogov_local.processes import wait_until

    def runs(team: str, name: str, pods: int) -> bool:
        view = call(stack, "GET", f"/v1/jobs/{team}/{name}", f"topogov-{team}").json()
        return bool(view["status"] == "Running" and (view.get("placement") or {}).get("placed") == pods)

    for team, name, pods, _, _ in JOBS:
        wait_until(functools.partial(runs, team, name, pods), f"{team}/{name} runs", 120, 0.5)
    handler(events.scheduled_event(), LocalContext())


def shoot(url: str, out: Path) -> list[Path]:
    from playwright.sync_api import sync_playwright

    written = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            page = browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
            page.goto(url)
            origin = url.split("/?", 1)[0]
            for file, route, ready, action in SHOTS:
                page.goto(f"{origin}/{route}")
                page.wait_for_selector(ready, timeout=60_000)
                if file == "dashboard-whatif.png":  # the repository's example: a trace, a proposal
                    examples = Path(__file__).resolve().parents[2] / "examples" / "whatif"
                    page.fill("#wi-trace", (examples / "trace.csv").read_text())
                    page.fill("#wi-policy", (examples / "teams-proposed.yaml").read_text())
                    page.fill("#wi-fleet", "")
                if action:
                    page.click(action)
                    page.wait_for_timeout(300)
                if file == "dashboard-whatif.png":
                    page.wait_for_selector("#whatif-out table", timeout=120_000)
                page.mouse.move(0, 0)
                page.wait_for_timeout(500)  # the charts' last frame
                page.screenshot(path=str(out / file))
                written.append(out / file)
        finally:
            browser.close()
    return written


def main(argv: list[str]) -> int:
    from topogov_cli.client import Api, Endpoint
    from topogov_cli.dashboard import serve
    from topogov_local.stack import LocalStack, StackOptions

    out = Path(argv[0] if argv else "docs").resolve()
    if not Path(CHROMIUM).exists():
        print(
            f"make screenshots: needs Debian's chromium at {CHROMIUM} (apt-get install chromium)",
            file=sys.stderr,
        )
        return 2
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="topogov-screenshots-") as tmp:
        opts = StackOptions(
            directory=Path(tmp), fleet=FLEET, extra_nodes=False, ec2_rate=1000, ec2_burst=1000, api_port=0,
            api_snapshot_ttl_s=0,
        )  # fmt: skip
        with LocalStack(opts) as stack:
            from topogov.handlers.reconcile import handler
            from topogov_local import events
            from topogov_local.lambda_context import LocalContext

            os.environ.update(stack.env())
            os.environ["AWS_SHARED_CREDENTIALS_FILE"] = str(stack.credentials)
            handler(events.scheduled_event(), LocalContext())  # labels, Kueue's objects, the snapshot
            for job in JOBS:
                submit(stack, *job)
            settle(stack)
            submit(stack, *WAITS)
            server = serve(Api(Endpoint(stack.api.url, "the local stack"), profile="topogov-admin"))
            try:
                written = shoot(server.url, out)
            finally:
                server.stop()
    for path in written:
        print(f"wrote {path} ({path.stat().st_size // 1024} KiB)")
    print(f"in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
