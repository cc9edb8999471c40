"""``topogov bench policies``: do Topogov's topology decisions beat plain Kueue? The same trace on the
same fleet under four regimes (:data:`topogov.logic.whatif.engine.REGIMES`), on the Kueue model:

* ``plain-kueue``: no topology annotation (Kueue's TAS still places every pod: LeastFreeCapacity);
* ``preferred``: every job preferred at the tightest level that holds it (the API's ``auto``);
* ``required``: every multi-node job required at the tightest level that can ever hold it;
* ``topogov``: that, falling back to preferred after 10 minutes (``fallbackAfter``), others auto.

A job's run time grows with how far apart its pods land (:class:`~topogov.logic.whatif.Penalty`:
412 ms/step inside one network node, 631 one layer up, 905 farther, the mission's published 256-GPU
example), scaled by each of ``--penalty-scale`` (0 = topology costs nothing, 1 = as published).
Reported per regime: wait p50/p95, GPU utilization and effective throughput (useful GPU work, at
full speed, per GPU-second) while jobs arrive, and the share of multi-node jobs inside one layer-3
network node.

Traces: ``walkthrough`` (examples/whatif: 150 jobs of three teams on the local stack's 68 nodes) and
``acme-seren`` (job sizes and durations of the Acme trace's Seren cluster, :mod:`topogov_local.traces`,
on 256 p5.48xlarge, three teams).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from topogov_cli.common import EXIT_OK, EXIT_USAGE

ROOT = Path(__file__).resolve().parents[3]  # local/topogov_local/bench/ -> the repository
EXAMPLES = ROOT / "examples" / "whatif"
REGIMES = ("plain-kueue", "preferred", "required", "topogov")
TRACES = ("walkthrough", "acme-seren")
SCALES = (0.0, 0.5, 1.0, 2.0)
ACME_FLEET = ((2, 4, 4), 8)  # 2 layer-1 x 4 layer-2 x 4 layer-3 network nodes, 8 hosts under each
ACME_SHARES = {"team-a": 0.5, "team-b": 0.3, "team-c": 0.2}


def acme_policy(gpus: int) -> Any:
    """Three teams sharing ``gpus`` 50/30/20, each may borrow as much again; caps out of the way."""
    from topogov.domain.policy import load_policy

    lines = ["priorityClasses:", "  - {name: training-priority, value: 500}", "fairShare: disabled", "teams:"]
    for team, share in ACME_SHARES.items():
        lines += [
            f"  {team}:",
            f"    principals: ['arn:aws:iam::123456789012:user/{team}']",
            f"    quota: {{nvidia.com/gpu: {int(gpus * share)}}}",
            "    sharing: LendAndBorrow",
            "    borrowLimitPercent: 100",
            f"    maxInFlight: {{nvidia.com/gpu: {gpus * 100}}}",
        ]
    return load_policy("\n".join(lines))


def workload(name: str, jobs: int, load: float) -> tuple[list[Any], list[Any], Any]:
    """(trace, fleet, policy) of a named trace."""
    from topogov.domain.policy import load_policy_file
    from topogov.logic.whatif import parse_fleet, parse_trace
    from topogov.logic.whatif.inputs import synthetic_fleet
    from topogov_local.traces import acme_seren

    if name == "walkthrough":
        trace = parse_trace((EXAMPLES / "trace.csv").read_text(encoding="utf-8"), "examples/whatif/trace.csv")
        nodes = parse_fleet((EXAMPLES / "fleet.csv").read_text(encoding="utf-8"), "examples/whatif/fleet.csv")
        return trace, nodes, load_policy_file(ROOT / "teams.yaml")
    fanout, per_leaf = ACME_FLEET
    nodes = synthetic_fleet("p5.48xlarge", fanout, per_leaf)
    gpus = sum(n.allocatable.gpu for n in nodes)
    return acme_seren(jobs, list(ACME_SHARES), gpus, load=load), nodes, acme_policy(gpus)


def run_one(trace: list[Any], nodes: list[Any], policy: Any, regime: str, scale: float) -> dict[str, Any]:
    from topogov.logic.whatif import Penalty, simulate, summarize

    cpu0 = time.process_time()
    fleet = summarize(simulate(trace, nodes, policy, regime=regime, penalty=Penalty().scaled(scale)))["fleet"]
    return {
        "regime": regime,
        "penalty_scale": scale,
        "wait_p50_s": fleet["wait_p50_s"],
        "wait_p95_s": fleet["wait_p95_s"],
        "utilization": fleet["window_utilization"],
        "throughput": fleet["window_goodput"],
        "inside_layer_3": fleet["inside_one_domain"]["layer-3"],
        "multi_node_jobs": fleet["multi_node_jobs"],
        "started": fleet["started"],
        "jobs": fleet["jobs"],
        "fallbacks": fleet["fallbacks"],
        "preemptions": fleet["preemptions"],
        "cpu_s": round(time.process_time() - cpu0, 2),
    }


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.0f}%"


def _s(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:.0f} s" if v < 120 else f"{v / 60:.0f} min" if v < 7200 else f"{v / 3600:.1f} h"


def markdown(trace: str, rows: list[dict[str, Any]], scales: tuple[float, ...]) -> str:
    """One table per trace: a regime a row; throughput at each penalty scale (1 = as published)."""
    head = ["regime", "wait p50", "wait p95", "GPU util.", "multi-node inside one layer-3"]
    head += [f"throughput ×{s:g}" for s in scales]
    out = [f"**{trace}**", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for regime in REGIMES:
        mine = {r["penalty_scale"]: r for r in rows if r["regime"] == regime}
        base = mine.get(1.0) or next(iter(mine.values()))
        cells = [regime, _s(base["wait_p50_s"]), _s(base["wait_p95_s"]), _pct(base["utilization"])]
        cells.append(f"{_pct(base['inside_layer_3'])} of {base['multi_node_jobs']}")
        cells += [_pct(mine[s]["throughput"]) if s in mine else "-" for s in scales]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def run(args: argparse.Namespace) -> int:
    traces = args.trace or list(TRACES)
    unknown = [t for t in traces if t not in TRACES]
    if unknown:
        print(f"topogov bench policies: --trace: unknown trace {unknown[0]!r} (known: {', '.join(TRACES)})")
        return EXIT_USAGE
    scales = tuple(args.penalty_scale or SCALES)
    results: dict[str, list[dict[str, Any]]] = {}
    for name in traces:
        trace, nodes, policy = workload(name, args.jobs, args.load)
        rows = results[name] = []
        for regime in REGIMES:
            for scale in scales:
                row = run_one(trace, nodes, policy, regime, scale)
                rows.append(row)
                if args.json:
                    print(json.dumps({"trace": name, **row}), flush=True)
                else:
                    print(
                        f"# {name} {regime} x{scale:g}: wait p95 {_s(row['wait_p95_s'])}, throughput "
                        f"{_pct(row['throughput'])}, inside layer-3 {_pct(row['inside_layer_3'])} "
                        f"({row['cpu_s']} s CPU)",
                        flush=True,
                    )
    if not args.json:
        print()
        for name, rows in results.items():
            print(markdown(name, rows, scales))
            print()
    return EXIT_OK


def run_speed(args: argparse.Namespace) -> int:
    """``topogov bench simulate``: the replay's CPU for ``--jobs`` Seren-shaped jobs arriving over a
    week on ``--nodes`` p5.48xlarge (targets: 20,000 jobs on 2,000 nodes in <= 60 s; linear in jobs)."""
    from topogov.logic.whatif import simulate
    from topogov.logic.whatif.inputs import synthetic_fleet
    from topogov_local.traces import acme_seren

    leaves = max(1, args.nodes // 8)
    fanout = (max(1, leaves // 50), 5, 10) if leaves >= 50 else (1, 1, leaves)
    nodes = synthetic_fleet("p5.48xlarge", fanout, 8)
    gpus = sum(n.allocatable.gpu for n in nodes)
    rows = []
    for jobs in args.jobs or [5000, 20000]:
        probe = acme_seren(jobs, list(ACME_SHARES), gpus, load=1.0)
        trace = acme_seren(jobs, list(ACME_SHARES), gpus, load=probe[-1].submit_s / (7 * 86400))
        cpu0 = time.process_time()
        run = simulate(trace, nodes, acme_policy(gpus))
        row = {"nodes": len(nodes), "jobs": jobs, "days": round(trace[-1].submit_s / 86400, 2),
               "cpu_s": round(time.process_time() - cpu0, 1), "cycles": run.cycles}  # fmt: skip
        rows.append(row)
        print(json.dumps(row) if args.json else f"# {jobs} jobs over a week on {len(nodes)} nodes: "
              f"{row['cpu_s']} s CPU ({run.cycles} model cycles)", flush=True)  # fmt: skip
    big = [r for r in rows if r["jobs"] >= 20000 and r["nodes"] >= 2000]
    if big and not args.json:
        verdict = "met" if big[0]["cpu_s"] <= 60 else "MISSED"
        print(f"target (20,000 jobs, 2,000 nodes, <= 60 s CPU): {verdict} ({big[0]['cpu_s']} s)")
    return EXIT_OK
