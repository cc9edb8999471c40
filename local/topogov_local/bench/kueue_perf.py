"""``topogov bench kueue-perf``: Kueue's own TAS performance test run here, beside the model's replays.

Upstream's test (``make run-tas-performance-scheduler`` in ``sigs.k8s.io/kueue@v0.17.0``) is its
runner (``test/performance/scheduler/runner``), which starts an envtest API server and etcd,
``minimalkueue`` (Kueue's core controllers and scheduler, client QPS 50 / burst 100), creates
``configs/tas/generator.yaml``'s 15,000 workloads and finishes each its run time after it sees
it admitted. This command builds both from the Kueue pins (``local/controlplane/kueue``), runs them
with the Makefile's arguments on the local cluster's own ``etcd`` and ``kube-apiserver``, and prints
each class's mean time to admission beside:

- upstream's means (the comments of ``configs/tas/rangespec.yaml``, 10 CI runs);
- the model replayed with cycles that take no time;
- the model replayed on :class:`~topogov_local.bench.kueue_timing.Timing` (a running Kueue's costs).

It also reports what :mod:`.kueue_timing` is measured from: Workload writes a second, cycles and the
time they spent, the fastest admission write. About 7 minutes on 2 cores, plus the first build.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import statistics
import subprocess
import tarfile
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from topogov_cli.common import EXIT_OK
from topogov_cli.render import table
from topogov_local.processes import StopOnSignal

KUEUE_MODULE = "sigs.k8s.io/kueue"
SCENARIO = "test/performance/scheduler/configs/tas"


def upstream_means(module: Path) -> dict[str, float]:
    """Each class's mean time to admission in seconds, from the rangespec's comments
    (``large-balanced-rack:    46_000        # 37862 / 1573 / 4.15%``)."""
    text = (module / SCENARIO / "rangespec.yaml").read_text()
    return {
        m.group(1): int(m.group(2)) / 1000
        for m in re.finditer(r"^\s+([a-z-]+-rack):\s+[\d_]+\s+#\s+(\d+) /", text, re.M)
    }


def run_upstream(module: Path, bin_dir: Path, out: Path, timeout_s: float = 1800) -> None:
    """Upstream's runner with the Makefile's TAS arguments; its processes stopped whatever happens."""
    assets = out / "assets"
    assets.mkdir(parents=True)
    for name in ("etcd", "kube-apiserver", "kubectl"):
        (assets / name).symlink_to(bin_dir / name)
    env = dict(os.environ, KUBEBUILDER_ASSETS=str(assets), PROJECT_DIR=str(module / "Makefile"))
    cmd = [
        str(bin_dir / "kueue-perf-runner"),
        f"--o={out}",
        f"--crds={module / 'config/components/crd/bases'}",
        f"--generatorConfig={module / SCENARIO / 'generator.yaml'}",
        f"--minimalKueue={bin_dir / 'minimalkueue'}",
        "--enableTAS=true",
        "--timeout=20m",
        "--withLogs=true",
        "--logToFile=true",
        "--metricsScrapeInterval=5s",
    ]
    # The runner starts its own etcd, API server and minimalkueue in its session: a signal to this
    # command (Ctrl-C, SIGTERM) must still stop them, so it becomes an exception the finally sees.
    with StopOnSignal() as signals, open(out / "runner.log", "w") as log:
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            rc = proc.wait(timeout=timeout_s)
        finally:
            signals.unwinding()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    if rc != 0:
        raise RuntimeError(f"the performance runner exited {rc}: see {out / 'runner.log'}")


def _duration(text: str) -> float:
    m = re.match(r"([\d.]+)(µs|ms|s|m)$", text)
    if m is None:
        return 0.0
    return float(m.group(1)) * {"µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0}[m.group(2)]


def cycle_stats(log: Path) -> dict[str, Any]:
    """From minimalkueue's level-2 log: cycles, the time they took, snapshot + nomination p50, and
    the fastest write of an admission (assumed in the cache to written)."""
    compute: dict[int, float] = {}
    took: list[float] = []
    assumed: dict[str, float] = {}
    writes: list[float] = []
    for line in log.open(errors="replace"):
        parts = line.split("\t")
        if len(parts) < 6:
            continue
        msg = parts[4]
        if msg not in (
            "Snapshot taken",
            "Nomination done",
            "Scheduling cycle complete",
            "Workload assumed in the cache",
            "Workload successfully admitted and assigned flavors",
        ):
            continue
        fields = json.loads(parts[5])
        if msg in ("Snapshot taken", "Nomination done"):
            cycle = fields["schedulingCycle"]
            compute[cycle] = compute.get(cycle, 0.0) + _duration(fields["duration"])
        elif msg == "Scheduling cycle complete":
            took.append(_duration(fields["duration"]))
        else:
            at = datetime.fromisoformat(parts[0][:26]).timestamp()
            key = f"{fields['workload']['namespace']}/{fields['workload']['name']}"
            if msg.startswith("Workload assumed"):
                assumed[key] = at
            elif key in assumed:
                writes.append(at - assumed.pop(key))
    return {
        "cycles": len(took),
        "cycle_time_s": round(sum(took), 1),
        "compute_p50_ms": round(statistics.median(compute.values()) * 1e3, 2) if compute else None,
        "fastest_admission_write_ms": round(min(writes) * 1e3, 2) if writes else None,
        "admission_write_p50_s": round(statistics.median(writes), 2) if writes else None,
    }


def write_rate(dump: Path) -> dict[str, float]:
    """minimalkueue's PATCH requests (Workload status) and their rate between the first and last
    scrape of its metrics."""
    points = []
    with tarfile.open(dump) as tar:
        for member in tar.getmembers():
            if not member.name.endswith(".prometheus"):
                continue
            fh = tar.extractfile(member)
            if fh is None:
                continue
            patches = sum(
                float(line.rsplit(" ", 1)[1])
                for line in fh.read().decode().splitlines()
                if line.startswith("rest_client_requests_total{") and 'method="PATCH"' in line
            )
            points.append((int(Path(member.name).stem) / 1000, patches))
    points.sort()
    (t0, p0), (t1, p1) = points[0], points[-1]
    return {"patches": p1, "patches_per_s": round((p1 - p0) / (t1 - t0), 1) if t1 > t0 else 0.0}


def measure(keep: Path | None = None) -> dict[str, Any]:
    """Build, run and read upstream's test; the figures as one object."""
    from topogov_local.cluster.build import PERF_TOOLS, ensure_built, module_dir

    bin_dir = ensure_built()
    ensure_built(tools=PERF_TOOLS)
    module = module_dir(KUEUE_MODULE, "v0.17.0", "kueue")
    out = keep or Path(tempfile.mkdtemp(prefix="topogov-kueue-perf-"))
    run_upstream(module, bin_dir, out)
    summary = yaml.safe_load((out / "summary.yaml").read_text())
    stats = yaml.safe_load((out / "minimalkueue.stats.yaml").read_text())
    return {
        "wall_s": stats["wallMs"] / 1000,
        "mean_wait_s": {
            k: v["averageTimeToAdmissionMs"] / 1000 for k, v in sorted(summary["workloadClasses"].items())
        },
        "evictions": sum(v["totalEvictions"] for v in summary["workloadClasses"].values()),
        **cycle_stats(out / "minimalkueue.err.log"),
        **write_rate(out / "metricsDump.tgz"),
        "upstream_mean_wait_s": upstream_means(module),
        "artifacts": str(out),
    }


def run(args: argparse.Namespace) -> int:
    """``topogov bench kueue-perf``."""
    from topogov_local.bench.admission import bench_kueue_perf_shape
    from topogov_local.bench.kueue_timing import Timing

    real = measure(args.keep)
    timed = bench_kueue_perf_shape(Timing())
    untimed = bench_kueue_perf_shape() if args.untimed else None
    if args.json:
        print(json.dumps({"kueue": real, "model_timed": timed, "model_untimed": untimed}))
        return EXIT_OK
    upstream = real["upstream_mean_wait_s"]
    cols = ["class", "upstream", "kueue here", "model timed", "timed vs upstream"]
    rows = []
    for k in sorted(upstream):
        model = timed["mean_wait_s"].get(k, float("nan"))
        rows.append([k, upstream[k], real["mean_wait_s"].get(k), model, f"{model / upstream[k] - 1:+.0%}"])
    if untimed:
        cols.append("model untimed")
        for row in rows:
            row.append(untimed["mean_wait_s"].get(row[0]))
    print("Mean time to admission, s (Kueue's TAS performance shape: 640 nodes, 15,000 workloads)")
    print(table(cols, rows))
    print(
        f"wall: Kueue here {real['wall_s']:.0f} s, upstream 401 s (rangespec), model timed "
        f"{timed['simulated_span_s']:.0f} s in {timed['model_cpu_s']} s of CPU"
    )
    r = real
    print(
        f"Kueue here: {r['patches']:.0f} Workload PATCHes ({r['patches_per_s']}/s), {r['cycles']} cycles "
        f"taking {r['cycle_time_s']} s, compute p50 {r['compute_p50_ms']} ms, admission write p50 "
        f"{r['admission_write_p50_s']} s (fastest {r['fastest_admission_write_ms']} ms), "
        f"{r['evictions']} evictions; model timed: {timed['workload_writes']} writes, "
        f"{timed['cycles']} cycles, {timed['preempted']} preemptions"
    )
    print(f"artifacts: {real['artifacts']}")
    return EXIT_OK
