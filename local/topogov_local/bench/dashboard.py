"""``topogov bench dashboard``: the dashboard's fleet page, measured in headless chromium, on the
reconcile bench's ``placed`` fleet: ``--nodes`` p5.48xlarge nodes (4 per layer-3 domain, 4 layer-3 per
layer-2, 4 layer-2 per layer-1, as the local EC2 emulator lays them out), ``--nodes``/5 Jobs of 10
Running pods of 4 GPUs, two per node (every GPU in use), as the snapshot of a reconcile pass has them.

``topogov dashboard``'s server runs here, signed as the local stack's admin, in front of the API;
chromium (Debian's, driven by Playwright) opens the printed URL. Measured by the browser itself:

* **first paint**: from the start of the navigation to the fleet map painted (the page's
  ``topogov:fleet-painted`` mark, set two animation frames after ECharts' ``finished`` event for
  every map: all of its rectangles on the canvas), for the first load (the API's first fleet answer
  for the snapshot: read, its node rows made; the browser's code cold; the API's process itself
  warmed first, see :func:`warm_up`) and the median of ``--loads`` reloads;
  with where the time went (the page's own files, the API call, parsing, building and drawing the
  maps, the paint);
* **per refresh**: the bytes the fleet call moves (Resource Timing's ``transferSize``: gzip body and
  headers; ``decodedBodySize`` uncompressed), and the API calls per refresh (every ``/api/`` request
  the page made over ``--watch-s`` seconds at a 2 s refresh, divided by the refreshes);
* **the upstream leg**: the bytes of one fleet call as they come from the API to the dashboard
  server (gzip when the API's ``minimumCompressionSize`` lets API Gateway compress it).

Targets (issue 26): first paint <= 1.5 s, <= 2 MB per refresh compressed, one call per view per
refresh. Missed targets are printed, never hidden.

Where the snapshot comes from. By default a local stack runs (moto with the app deployed by the CDK
CLI, Kubernetes and Kueue; the API's handler with the deployed function's environment, behind the
local API Gateway serving the deployed routes and ``minimumCompressionSize``), and the placed fleet's
snapshot is written to the deployed bucket by the snapshot store a reconcile pass writes with, as
the reconcile function's role: the API reads it from S3 as it reads any pass's. The nodes and pods
themselves are not created in Kubernetes: without KWOK's heartbeats a Node never turns Ready (the
node lifecycle controller marks it Unknown and taints it unreachable), so every one of 10,000 such
nodes would be left out of the snapshot, and KWOK's heartbeats for 10,000 nodes would load 2 cores
(the reconcile bench measures a pass over 10,000 Nodes and 20,000 pods). ``--without-stack`` serves
the same snapshot from memory through the API's handler behind the local API Gateway (SigV4 checked,
compressing as the synthesized template's RestApi says), without Kubernetes, moto or S3.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from topogov_cli.common import EXIT_OK
from topogov_cli.render import table

CHROMIUM = "/usr/bin/chromium"
TARGET_PAINT_MS = 1500
TARGET_BYTES = 2_000_000


def _say(text: str) -> None:
    print(text, flush=True)


def placed_snapshot(n: int) -> Any:
    """The snapshot a reconcile pass writes for the placed fleet of ``n`` nodes (see the module)."""
    from topogov.domain.capacity import capacity_record
    from topogov.domain.fleet_map import running_jobs
    from topogov.domain.placement_quality import JobPod, quality
    from topogov.domain.quantity import Resources
    from topogov.domain.snapshot import Snapshot
    from topogov.domain.tree import NodeCapacity
    from topogov_local.bench.reconcile import PODS_PER_JOB

    alloc = Resources(8, 32, 191450, 2002 * 2**30)
    names = [f"i-{i:017x}.ec2.internal" for i in range(n)]
    pods = [
        JobPod(f"hyperpod-ns-team-{'abc'[j % 3]}", f"bench-{j}", f"uid-{j}",
               names[(j * PODS_PER_JOB + k) // 2 % n], "required", None, 4)
        for j in range(max(1, n // 5)) for k in range(PODS_PER_JOB)
    ]  # fmt: skip
    used: dict[str, int] = {}
    for p in pods:
        used[p.node] = used.get(p.node, 0) + p.gpus
    nodes = {
        name: NodeCapacity(name, (f"nn-1{i // 64:016x}", f"nn-2{i // 16:016x}", f"nn-3{i // 4:016x}"),
                           "p5.48xlarge", name.split(".")[0], alloc, Resources(used.get(name, 0), 0, 0, 0))
        for i, name in enumerate(names)
    }  # fmt: skip
    team_of = {f"hyperpod-ns-team-{t}": f"team-{t}" for t in "abc"}
    snap = Snapshot(nodes=nodes, generated_at=time.time(), placement=quality(pods, nodes, team_of))
    snap.running = running_jobs(pods)
    snap.capacity = capacity_record(nodes)  # as the pass that writes it stores it
    return snap


@contextlib.contextmanager
def placed_stack(n: int, directory: Path) -> Iterator[Any]:
    """A local stack whose API reads the placed fleet's snapshot from the deployed bucket."""
    import boto3

    from topogov.adapters.snapshot_store import S3SnapshotStore
    from topogov.settings import ReconcileSettings
    from topogov_local.processes import environ
    from topogov_local.stack import LocalStack, StackOptions

    opts = StackOptions(
        directory=directory, fleet="p5.48xlarge=4", extra_nodes=False, api_port=0, api_snapshot_ttl_s=0
    )
    t0 = time.perf_counter()
    with LocalStack(opts) as stack:
        _say(f"#   a local stack deployed and started in {time.perf_counter() - t0:.0f}s")
        t0 = time.perf_counter()
        snapshot = placed_snapshot(n)
        with environ(stack.env()):  # as the reconcile function: its role's credentials, the emulator
            settings = ReconcileSettings.from_env()
            store = S3SnapshotStore(boto3.client("s3"), settings.snapshot_bucket, settings.snapshot_key)
            store.save(snapshot)
        where = f"s3://{settings.snapshot_bucket}/{settings.snapshot_key}"
        _say(
            f"#   the snapshot ({len(snapshot.nodes)} nodes, {len(snapshot.running)} running jobs) "
            f"written to {where} in {time.perf_counter() - t0:.0f}s"
        )
        yield stack


@contextlib.contextmanager
def snapshot_api(n: int, directory: Path) -> Iterator[Any]:
    """The API (its handler, behind the local API Gateway) over the placed fleet's snapshot in memory;
    yields an object with ``api.url`` and ``credentials`` as a stack has them."""
    import secrets
    import types
    from typing import cast

    from topogov.domain.policy import load_policy_file
    from topogov.handlers import api
    from topogov.logic.api_service import ApiService
    from topogov_local.apigw import LocalApiGateway, callers_from_credentials_file
    from topogov_local.deployment import assembly, template_compression

    snap = placed_snapshot(n)
    root = Path(__file__).resolve().parents[3]
    policy = load_policy_file(str(root / "teams.yaml"))
    source = types.SimpleNamespace(load=lambda: snap)
    api.set_service(ApiService(policy, source, cast(Any, None), cast(Any, None)))
    credentials = directory / "aws-credentials"
    credentials.write_text(
        "[topogov-admin]\naws_access_key_id = AKIA" + secrets.token_hex(8).upper()
        + "\naws_secret_access_key = " + secrets.token_urlsafe(30) + "\n"
    )  # fmt: skip
    gateway = LocalApiGateway(
        api.handler, callers_from_credentials_file(credentials), port=0, stage="prod", routes=api.routes(),
        minimum_compression_size=template_compression(assembly()),  # as the deployed RestApi's
    )  # fmt: skip
    gateway.start()
    try:
        yield types.SimpleNamespace(api=gateway, credentials=credentials)
    finally:
        gateway.stop()


# functions, not expressions: the page's Content-Security-Policy forbids eval
PAINTED = "() => performance.getEntriesByName('topogov:fleet-painted').length > 0"
TIMINGS = """() => {
  const nav = performance.getEntriesByType('navigation')[0];
  const res = performance.getEntriesByType('resource');
  const of = (part) => res.filter((r) => r.name.includes(part));
  const fleet = of('/api/v1/topology')[0];
  const files = res.filter((r) => /\\/(app\\.js|style\\.css)$/.test(r.name));
  return {
    paint_ms: performance.getEntriesByName('topogov:fleet-painted')[0].startTime,
    answer_ms: performance.getEntriesByName('topogov:fleet-answer')[0].startTime,
    drawn_ms: performance.getEntriesByName('topogov:fleet-drawn')[0].startTime,
    html_ms: nav.responseEnd,
    files_ms: Math.max(...files.map((r) => r.responseEnd)),
    files_bytes: files.reduce((a, r) => a + r.transferSize, 0),
    api_start_ms: fleet.startTime, api_end_ms: fleet.responseEnd,
    api_bytes: fleet.transferSize, api_body_gzip: fleet.encodedBodySize, api_body_raw: fleet.decodedBodySize,
  };
}"""


def measure(url: str, loads: int, watch_s: float) -> dict[str, Any]:
    """The fleet page in chromium: the first load, ``loads`` reloads, then ``watch_s`` s of refreshes."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            page = browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
            errors: list[str] = []
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            runs = []
            for i in range(loads + 1):
                if i == 0:
                    page.goto(url, wait_until="commit")
                else:
                    page.reload(wait_until="commit")
                page.wait_for_function(PAINTED, timeout=120_000)
                runs.append(page.evaluate(TIMINGS))
            cells = sum(len(m["cells"]) for m in page.evaluate("() => window.topogov.fleetCells()"))
            page.evaluate("() => { performance.clearResourceTimings(); window.topogov.calls.count = 0; }")
            page.wait_for_timeout(watch_s * 1000)
            seen = page.evaluate(
                "() => performance.getEntriesByType('resource').filter((r) => r.name.includes('/api/'))"
                ".map((r) => ({name: new URL(r.name).pathname, bytes: r.transferSize}))"
            )
        finally:
            browser.close()
    fleet_calls = [r for r in seen if r["name"] == "/api/v1/topology"]
    return {"runs": runs, "cells": cells, "errors": errors, "calls": seen, "refreshes": len(fleet_calls)}


def run(args: argparse.Namespace) -> int:
    from topogov_cli.client import Api, Endpoint
    from topogov_cli.dashboard import serve

    if not Path(CHROMIUM).exists():
        print(f"topogov bench dashboard: needs Debian's chromium at {CHROMIUM} (apt-get install chromium)")
        return 2
    rows = []
    for n in args.nodes:
        with tempfile.TemporaryDirectory(prefix="topogov-bench-dashboard-") as tmp:
            where = "in memory" if args.without_stack else "in a local stack's bucket"
            _say(f"# {n} nodes, {n // 5} Jobs of 10 Running pods: their snapshot {where} ...")
            fleet = snapshot_api if args.without_stack else placed_stack
            with fleet(n, Path(tmp)) as stack:
                os.environ["AWS_SHARED_CREDENTIALS_FILE"] = str(stack.credentials)
                api = Api(Endpoint(stack.api.url, "the local stack"), profile="topogov-admin")
                warm_up(api)
                server = serve(api, 0, refresh_s=2.0)
                try:
                    found = measure(server.url, args.loads, args.watch_s)
                finally:
                    server.stop()
                found["upstream"] = upstream_bytes(api)
            rows.append({"nodes": n, "jobs": n // 5, **summarize(found)})
    report(rows, args.json)
    return EXIT_OK


def warm_up(api: Any) -> None:
    """One request the API refuses (``GET /v1/topology?view=nope``: 400, the snapshot not read)
    before the browser: the API's process makes its Tracer (the X-Ray SDK's clients: about 0.3 s of
    CPU) and its resolver as SnapStart's before-snapshot hook does for a deployed one
    (``topogov.handlers.snapstart.prime``), so the first load measures the page and the API's first
    fleet answer for the snapshot, not a Python process's start."""
    from topogov_cli.sigv4 import signed_request

    url = api.url("/v1/topology", {"view": "nope"})
    resp = signed_request("GET", url, credentials=api.credentials(), region=api.region())
    if resp.status_code != 400:
        raise RuntimeError(f"warming the API: {url} answered {resp.status_code}: {resp.text[:200]}")


def upstream_bytes(api: Any) -> dict[str, int]:
    """The fleet call's body as it comes from the API to the dashboard server, in bytes on the wire:
    asked with ``Accept-Encoding: gzip`` (as the server asks) and with ``identity``."""
    import requests

    from topogov_cli.sigv4 import signed_request

    sizes = {}
    url = api.url("/v1/topology", {"view": "capacity", "nodes": "true"})
    for coding in ("gzip", "identity"):
        with requests.Session() as http:
            http.headers["Accept-Encoding"] = coding
            resp = signed_request(
                "GET", url, credentials=api.credentials(), region=api.region(), session=http, stream=True
            )
            try:
                sizes[coding] = len(resp.raw.read(decode_content=False))
            finally:
                resp.close()
    return sizes


def summarize(found: dict[str, Any]) -> dict[str, Any]:
    first, again = found["runs"][0], found["runs"][1:] or found["runs"]
    per_refresh = [c["bytes"] for c in found["calls"] if c["name"] == "/api/v1/topology"]
    refreshes = max(1, found["refreshes"])

    def median(key: str) -> float:
        return round(statistics.median(r[key] for r in again))

    return {
        "cells": found["cells"],
        "first_paint_ms": round(first["paint_ms"]),
        "first_api_ms": round(first["api_end_ms"] - first["api_start_ms"]),
        "first_draw_ms": round(first["drawn_ms"] - first["answer_ms"]),
        "paint_ms": median("paint_ms"),
        "files_ms": median("files_ms"),
        "api_ms": round(statistics.median(r["api_end_ms"] - r["api_start_ms"] for r in again)),
        "after_answer_ms": round(statistics.median(r["paint_ms"] - r["api_end_ms"] for r in again)),
        "parse_ms": round(statistics.median(r["answer_ms"] - r["api_end_ms"] for r in again)),
        "draw_ms": round(statistics.median(r["drawn_ms"] - r["answer_ms"] for r in again)),
        "render_ms": round(statistics.median(r["paint_ms"] - r["drawn_ms"] for r in again)),
        "files_bytes": first["files_bytes"],
        "refresh_bytes": max(per_refresh) if per_refresh else None,
        "body_raw_bytes": first["api_body_raw"],
        "body_gzip_bytes": first["api_body_gzip"],
        "upstream_gzip_bytes": found["upstream"]["gzip"],
        "upstream_identity_bytes": found["upstream"]["identity"],
        "refreshes": found["refreshes"],
        "calls_per_refresh": round(len(found["calls"]) / refreshes, 2),
        "console_errors": found["errors"],
    }


def report(rows: list[dict[str, Any]], as_json: bool) -> None:
    problems = []
    for r in rows:
        if max(r["first_paint_ms"], r["paint_ms"]) > TARGET_PAINT_MS:
            problems.append(
                f"{r['nodes']} nodes: first paint {max(r['first_paint_ms'], r['paint_ms'])} ms > 1500"
            )
        if (r["refresh_bytes"] or 0) > TARGET_BYTES:
            problems.append(f"{r['nodes']} nodes: {r['refresh_bytes']} bytes per refresh > 2 MB")
        if r["calls_per_refresh"] != 1:
            problems.append(f"{r['nodes']} nodes: {r['calls_per_refresh']} calls per refresh, not 1")
        if r["cells"] != r["nodes"]:
            problems.append(f"{r['nodes']} nodes: the map has {r['cells']} cells")
        if r["console_errors"]:
            problems.append(f"{r['nodes']} nodes: console errors {r['console_errors'][:3]}")
    if as_json:
        for r in rows:
            print(json.dumps(r))
        print(json.dumps({"targets_met": not problems, "missed": problems}))
        return
    print()
    cols = ["nodes", "cells", "first_paint_ms", "first_api_ms", "first_draw_ms"]
    print(table(cols, ([r[c] for c in cols] for r in rows)))
    cols = ["nodes", "paint_ms", "files_ms", "api_ms", "parse_ms", "draw_ms", "render_ms"]
    print(table(cols, ([r[c] for c in cols] for r in rows)))
    cols = [
        "nodes",
        "refresh_bytes",
        "body_gzip_bytes",
        "body_raw_bytes",
        "files_bytes",
        "upstream_gzip_bytes",
        "upstream_identity_bytes",
        "refreshes",
        "calls_per_refresh",
    ]
    print(table(cols, ([r[c] for c in cols] for r in rows)))
    print("targets (first paint <= 1.5 s, <= 2 MB per refresh compressed, 1 call per refresh):",
          "met" if not problems else "MISSED: " + "; ".join(problems))  # fmt: skip
