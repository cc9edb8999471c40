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
from collections.abc import Iterator
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
    messages = (
        "Snapshot taken",
        "Nomination done",
        "Scheduling cycle complete",
        "Workload assumed in the cache",
        "Workload successfully admitted and assigned flavors",
    )
    for at, msg, fields in _events(log, messages):
        if msg in ("Snapshot taken", "Nomination done"):
            cycle = fields["schedulingCycle"]
            compute[cycle] = compute.get(cycle, 0.0) + _duration(fields["duration"])
        elif msg == "Scheduling cycle complete":
            took.append(_duration(fields["duration"]))
        else:
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


def _events(log: Path, messages: tuple[str, ...]) -> Iterator[tuple[float, str, dict[str, Any]]]:
    """minimalkueue's level-2 log lines with one of ``messages``: (time, message, fields)."""
    for line in log.open(errors="replace"):
        parts = line.split("\t")
        if len(parts) >= 6 and parts[4] in messages:
            yield datetime.fromisoformat(parts[0][:26]).timestamp(), parts[4], json.loads(parts[5])


# upstream's generator names a workload ``<class>-<set>-<index>-<template>`` in the namespace of its
# ClusterQueue ``cq-<cohort set>-<queue>-cohort-<cohort>`` (runner/generator/generator.go); the model
# names it ``cq-<queue>-cohort-<cohort>-<class>-<index>`` (admission._perf_shape)
_GENERATED = re.compile(r"cq-\d+-(\d+)-cohort-(\d+)/([a-z]+-[a-z]+-rack)-\d+-(\d+)-\d+$")


def arrivals(log: Path) -> dict[str, float]:
    """When each workload reached Kueue (its create event), seconds after the first, by the model's
    name for it: the run's own arrivals, for a replay of the workload as this run created it."""
    out: dict[str, float] = {}
    for at, _msg, fields in _events(log, ("Workload create event",)):
        wl = fields["workload"]
        m = _GENERATED.match(f"{wl['namespace']}/{wl['name']}")
        if m is not None:
            out[f"cq-{m.group(1)}-cohort-{m.group(2)}-{m.group(3)}-{m.group(4)}"] = at
    first = min(out.values(), default=0.0)
    return {name: at - first for name, at in out.items()}


def run_times(module: Path) -> dict[str, float]:
    """Each class's run time in seconds (``runtimeMs`` in the scenario's ``generator.yaml``)."""
    config = yaml.safe_load((module / SCENARIO / "generator.yaml").read_text())
    return {
        wl["className"]: wl["runtimeMs"] / 1000
        for cohort in config["cohorts"]
        for queues in cohort["queuesSets"]
        for wl_set in queues["workloadsSets"]
        for wl in wl_set["workloads"]
    }


def finish_lag(log: Path, run_s: dict[str, float]) -> dict[str, float | None]:
    """How long after its run time the runner's finish of a workload reached Kueue (its "finished"
    update event, minus its "admitted" one, minus its class's run time), p50 in seconds, for
    workloads admitted while the generator was still creating and for those admitted after."""
    last_created = 0.0
    admitted: dict[str, float] = {}
    lags: list[tuple[float, float]] = []  # (admitted at, lag)
    for at, msg, fields in _events(log, ("Workload create event", "Workload update event")):
        key = f"{fields['workload']['namespace']}/{fields['workload']['name']}"
        if msg == "Workload create event":
            last_created = at
        elif fields.get("status") == "admitted" and fields.get("prevStatus") == "pending":
            admitted[key] = at
        elif fields.get("status") == "finished" and key in admitted:
            m = _GENERATED.match(key)
            start = admitted.pop(key)
            lags.append((start, at - start - (run_s.get(m.group(3), 0.0) if m else 0.0)))
    during = [lag for start, lag in lags if start <= last_created]
    after = [lag for start, lag in lags if start > last_created]
    return {
        "finish_lag_p50_while_creating_s": round(statistics.median(during), 3) if during else None,
        "finish_lag_p50_after_s": round(statistics.median(after), 3) if after else None,
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


def measure(keep: Path | None = None, artifacts: Path | None = None) -> dict[str, Any]:
    """Build, run and read upstream's test (or read the artifacts of an earlier run); the figures as
    one object, with the run's arrivals (``arrivals``) for a replay on them."""
    from topogov_local.cluster.build import PERF_TOOLS, ensure_built, module_dir

    module = module_dir(KUEUE_MODULE, "v0.17.0", "kueue")
    if artifacts is None:
        bin_dir = ensure_built()
        ensure_built(tools=PERF_TOOLS)
        artifacts = keep or Path(tempfile.mkdtemp(prefix="topogov-kueue-perf-"))
        run_upstream(module, bin_dir, artifacts)
    return read_run(module, artifacts)


def read_run(module: Path, out: Path) -> dict[str, Any]:
    """The figures of one run of upstream's test from its artifacts in ``out``."""
    summary = yaml.safe_load((out / "summary.yaml").read_text())
    stats = yaml.safe_load((out / "minimalkueue.stats.yaml").read_text())
    log = out / "minimalkueue.err.log"
    created = arrivals(log)
    return {
        "wall_s": stats["wallMs"] / 1000,
        "mean_wait_s": {
            k: v["averageTimeToAdmissionMs"] / 1000 for k, v in sorted(summary["workloadClasses"].items())
        },
        "evictions": sum(v["totalEvictions"] for v in summary["workloadClasses"].values()),
        "creation_span_s": round(max(created.values(), default=0.0), 1),
        **cycle_stats(log),
        **finish_lag(log, run_times(module)),
        **write_rate(out / "metricsDump.tgz"),
        "upstream_mean_wait_s": upstream_means(module),
        "artifacts": str(out),
        "arrivals": created,
    }


def run(args: argparse.Namespace) -> int:
    """``topogov bench kueue-perf``."""
    from topogov_local.bench.admission import bench_kueue_perf_shape
    from topogov_local.bench.kueue_timing import Timing

    real = measure(args.keep, args.artifacts)
    timed = bench_kueue_perf_shape(Timing())
    on_arrivals = bench_kueue_perf_shape(Timing(), real.pop("arrivals"))
    untimed = bench_kueue_perf_shape() if args.untimed else None
    if args.json:
        print(json.dumps({"kueue": real, "model_timed": timed, "model_timed_on_arrivals": on_arrivals,
                          "model_untimed": untimed}))  # fmt: skip
        return EXIT_OK
    _print_table(real, timed, on_arrivals, untimed)
    _print_costs(real, timed, on_arrivals)
    return EXIT_OK


def _print_table(
    real: dict[str, Any], timed: dict[str, Any], on_arrivals: dict[str, Any], untimed: dict[str, Any] | None
) -> None:
    upstream, here = real["upstream_mean_wait_s"], real["mean_wait_s"]
    cols = [
        "class",
        "upstream",
        "model timed",
        "vs upstream",
        "kueue here",
        "model, run's arrivals",
        "vs here",
    ]
    rows = []
    for k in sorted(upstream):
        model, same = (
            timed["mean_wait_s"].get(k, float("nan")),
            on_arrivals["mean_wait_s"].get(k, float("nan")),
        )
        rows.append([k, upstream[k], model, f"{model / upstream[k] - 1:+.0%}", here.get(k), same,
                     f"{same / here[k] - 1:+.0%}" if here.get(k) else "-"])  # fmt: skip
    if untimed:
        cols.append("model untimed")
        for row in rows:
            row.append(untimed["mean_wait_s"].get(row[0]))
    print("Mean time to admission, s (Kueue's TAS performance shape: 640 nodes, 15,000 workloads)")
    print(table(cols, rows))


def _print_costs(real: dict[str, Any], timed: dict[str, Any], on_arrivals: dict[str, Any]) -> None:
    r = real
    print(
        f"wall: Kueue here {r['wall_s']:.0f} s, upstream 401 s (rangespec), model timed "
        f"{timed['simulated_span_s']:.0f} s ({on_arrivals['simulated_span_s']:.0f} s on the run's arrivals) "
        f"in {timed['model_cpu_s']} s of CPU"
    )
    print(
        f"Kueue here: {r['patches']:.0f} Workload PATCHes ({r['patches_per_s']}/s), {r['cycles']} cycles "
        f"taking {r['cycle_time_s']} s, compute p50 {r['compute_p50_ms']} ms, admission write p50 "
        f"{r['admission_write_p50_s']} s (fastest {r['fastest_admission_write_ms']} ms), "
        f"{r['evictions']} evictions; workloads created over {r['creation_span_s']} s; the runner's "
        f"finish p50 {r['finish_lag_p50_while_creating_s']} s after the run time while they were created, "
        f"{r['finish_lag_p50_after_s']} s after"
    )
    for what, m in (("model timed", timed), ("on the run's arrivals", on_arrivals)):
        print(
            f"{what}: {m['workload_writes']} writes, {m['cycles']} cycles, {m['preempted']} preemptions; "
            f"loaded until {m['loaded_until_s']} s, the runner's finish p50 "
            f"{m['finish_lag_p50_while_loaded_s']} s after the run time then, "
            f"{m['finish_lag_p50_after_s']} s after"
        )
    print(f"artifacts: {r['artifacts']}")
