"""The walkthrough's "what if" step: a policy change replayed before it is made, on this cluster's
fleet (the topology snapshot the reconcile pass wrote), with ``topogov whatif``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from topogov_local.walkthrough.console import Console, shown

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples" / "whatif"


def whatif(c: Console, n_step: int) -> None:
    c.step(n_step, "What if: a policy change replayed on this fleet before it is made (topogov whatif)")
    c.note(
        f"{shown(EXAMPLES / 'teams-proposed.yaml')} moves 64 GPUs of nominal quota from team-a to team-c "
        "and lets team-c borrow. The same 150-job trace runs on the Kueue model under both policies, on "
        "the fleet of the snapshot the last pass wrote (its nodes as if empty), each job through the "
        "API's own decision:"
    )
    args = [
        "whatif",
        "--trace",
        shown(EXAMPLES / "trace.csv"),
        "--fleet",
        "snapshot",
        "--baseline-policy",
        shown(ROOT / "teams.yaml"),
        "--policy",
        shown(EXAMPLES / "teams-proposed.yaml"),
    ]
    c.topogov(None, *args)
    scenarios = json.loads(c.topogov(None, *args, "--output", "json", show=False))["scenarios"]
    c.note(
        f"Wait p95, baseline -> proposed: {changes(scenarios)}. Nothing in the cluster changed: the "
        "comparison is offline; --output json gives every job's start and nodes."
    )


def changes(scenarios: dict[str, Any]) -> str:
    """``team-a 5.7 h -> 3.7 h, team-b ...``: each team's wait p95 under both policies."""
    out = []
    for team, base in sorted(scenarios["baseline"]["teams"].items()):
        new = scenarios["proposed"]["teams"][team]
        out.append(f"{team} {_s(base['wait_p95_s'])} -> {_s(new['wait_p95_s'])}")
    return ", ".join(out)


def _s(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:.0f} s" if v < 120 else f"{v / 60:.0f} min" if v < 7200 else f"{v / 3600:.1f} h"
