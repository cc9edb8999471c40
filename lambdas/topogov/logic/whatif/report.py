"""What a simulation says, per team and for the fleet (pure): the figures ``topogov whatif`` prints
side by side and returns as JSON (``scenarios`` keyed by name, each with ``teams``, ``fleet``,
``jobs``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from topogov.logic.whatif.engine import JobRun, Run

LAYERS = (1, 2, 3, 4)


def percentile(values: Sequence[float], q: float) -> float | None:
    """The nearest-rank ``q`` percentile (0 < q <= 100) of ``values``; None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))
    return ordered[int(rank) - 1]


def _waits(jobs: Iterable[JobRun]) -> dict[str, float | None]:
    waits = [w for j in jobs if (w := j.wait_s) is not None]
    return {
        "wait_p50_s": percentile(waits, 50),
        "wait_p95_s": percentile(waits, 95),
        "wait_max_s": max(waits) if waits else None,
    }


def _inside(jobs: Iterable[JobRun], depth: int = 3) -> dict[str, float | None]:
    """Per layer, the share of started multi-node jobs whose hosts all share that layer's node."""
    multi = [j for j in jobs if j.start_s is not None and len(set(j.nodes)) > 1]
    out: dict[str, float | None] = {}
    for layer in LAYERS[:depth]:
        out[f"layer-{layer}"] = (
            (sum(1 for j in multi if j.shared_layers >= layer) / len(multi)) if multi else None
        )
    return out


def summarize(run: Run) -> dict[str, Any]:
    """The scenario's figures (times in seconds, GPU-hours as floats)."""
    span = max(run.timeline.end_s - run.timeline.start_s, 1e-9)
    by_team: dict[str, list[JobRun]] = {}
    for j in run.jobs:
        by_team.setdefault(j.team, []).append(j)
    teams = {
        team: _team(run, by_team.get(team, []), team, span)
        for team in sorted(set(run.quota_gpus) | set(by_team))
    }
    return {
        "regime": run.regime,
        "teams": teams,
        "fleet": _fleet(run, span),
        "jobs": [j.to_json() for j in run.jobs],
    }


def _counts(jobs: Sequence[JobRun]) -> dict[str, Any]:
    return {
        "jobs": len(jobs),
        "started": sum(1 for j in jobs if j.start_s is not None),
        "finished": sum(1 for j in jobs if j.end_s is not None),
        "refused": sum(1 for j in jobs if j.refused),
        "never_started": sum(1 for j in jobs if j.start_s is None and not j.refused),
        **_waits(jobs),
        "preemptions": sum(j.preemptions for j in jobs),
        "fallbacks": sum(1 for j in jobs if j.fallback_s is not None),
    }


def _team(run: Run, jobs: Sequence[JobRun], team: str, span: float) -> dict[str, Any]:
    return {
        **_counts(jobs),
        "gpu_hours": run.timeline.gpu_s.get(team, 0.0) / 3600,
        "quota_gpu_hours": run.quota_gpus.get(team, 0) * span / 3600,
        "borrowed_gpu_hours": run.timeline.borrowed_gpu_s.get(team, 0.0) / 3600,
    }


def _fleet(run: Run, span: float) -> dict[str, Any]:
    tl = run.timeline
    window = tl.window_end_s - tl.start_s
    capacity = run.fleet_gpus * window  # GPU-seconds the fleet offers while jobs arrive
    used_gpu_s = sum(tl.gpu_s.values())
    ideal_gpu_s = sum(j.gpus * j.duration_s for j in run.jobs if j.end_s is not None)
    return {
        **_counts(run.jobs),
        "gpus": run.fleet_gpus,
        "span_s": span,
        "gpu_hours": used_gpu_s / 3600,
        "utilization": used_gpu_s / (run.fleet_gpus * span) if run.fleet_gpus else 0.0,
        "goodput": ideal_gpu_s / (run.fleet_gpus * span) if run.fleet_gpus else 0.0,
        # while jobs arrive (first to last submission): GPUs held, and useful work done (each finished
        # run's GPUs x trace duration, spread over its run time: a penalised placement does less)
        "window_s": window,
        "window_utilization": tl.window_gpu_s / capacity if capacity else None,
        "window_goodput": tl.window_useful_gpu_s / capacity if capacity else None,
        "multi_node_jobs": sum(1 for j in run.jobs if j.start_s is not None and len(set(j.nodes)) > 1),
        "inside_one_domain": _inside(run.jobs),
        "bottom_domains": run.bottom_domains,
        "free_whole_domains_mean": tl.free_domains_s / span,
        "free_whole_domains_min": tl.free_domains_min,
        "model_cycles": run.cycles,
    }


# -- text ------------------------------------------------------------------------------------------
def _fmt(value: Any, kind: str) -> str:
    if value is None:
        return "-"
    if kind == "s":
        v = float(value)
        return f"{v:.0f}s" if v < 120 else f"{v / 60:.1f}m" if v < 7200 else f"{v / 3600:.1f}h"
    if kind == "%":
        return f"{100 * float(value):.0f}%"
    if kind == "h":
        return f"{float(value):,.0f}"
    if kind == "f":
        return f"{float(value):.1f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


FLEET_ROWS = (
    ("jobs started / submitted", None, "started"),
    ("refused by the API", "i", "refused"),
    ("never started", "i", "never_started"),
    ("wait p50", "s", "wait_p50_s"),
    ("wait p95", "s", "wait_p95_s"),
    ("wait max", "s", "wait_max_s"),
    ("GPU-hours used", "h", "gpu_hours"),
    ("utilization", "%", "utilization"),
    ("preemptions", "i", "preemptions"),
    ("fallbacks to preferred", "i", "fallbacks"),
    ("multi-node jobs", "i", "multi_node_jobs"),
    ("  inside one layer-3 node", "%", ("inside_one_domain", "layer-3")),
    ("  inside one layer-2 node", "%", ("inside_one_domain", "layer-2")),
    ("  inside one layer-1 node", "%", ("inside_one_domain", "layer-1")),
    ("free whole layer-3 nodes, mean", "f", "free_whole_domains_mean"),
    ("free whole layer-3 nodes, min", "i", "free_whole_domains_min"),
)
TEAM_ROWS = (
    ("started / submitted", None, "started"),
    ("wait p50", "s", "wait_p50_s"),
    ("wait p95", "s", "wait_p95_s"),
    ("wait max", "s", "wait_max_s"),
    ("GPU-hours used / quota", None, "gpu_hours"),
    ("borrowed GPU-hours", "h", "borrowed_gpu_hours"),
    ("preemptions suffered", "i", "preemptions"),
)


def _value(figures: Mapping[str, Any], key: Any) -> Any:
    if isinstance(key, tuple):
        return (figures.get(key[0]) or {}).get(key[1])
    return figures.get(key)


def _cell(figures: Mapping[str, Any], kind: str | None, key: Any) -> str:
    if key == "started":
        return f"{figures['started']:,} / {figures['jobs']:,}"
    if key == "gpu_hours" and "quota_gpu_hours" in figures:
        return f"{figures['gpu_hours']:,.0f} / {figures['quota_gpu_hours']:,.0f}"
    return _fmt(_value(figures, key), kind or "")


def render_text(scenarios: Mapping[str, Mapping[str, Any]], width: int = 100) -> str:
    """The scenarios side by side (at most 100 columns: 3 scenarios of 20 beside a 36-column label)."""
    names = list(scenarios)
    col = max(12, min(20, (width - 36) // max(1, len(names)) - 1))
    label_w = 36

    def row(label: str, cells: Sequence[str]) -> str:
        return (label[:label_w].ljust(label_w) + "".join(c[:col].rjust(col + 1) for c in cells)).rstrip()

    lines = [row("", names), row("fleet", ["-" * min(col, len(n) + 2) for n in names])]
    for label, kind, key in FLEET_ROWS:
        lines.append(row(label, [_cell(scenarios[n]["fleet"], kind, key) for n in names]))
    teams = sorted({t for n in names for t in scenarios[n]["teams"]})
    for team in teams:
        lines.append("")
        lines.append(row(team, []))
        for label, kind, key in TEAM_ROWS:
            cells = [_cell(scenarios[n]["teams"].get(team) or _EMPTY, kind, key) for n in names]
            lines.append(row("  " + label, cells))
    return "\n".join(lines)


_EMPTY = {"jobs": 0, "started": 0, "gpu_hours": 0.0, "quota_gpu_hours": 0.0}
