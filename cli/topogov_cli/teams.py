"""``topogov teams``: each team's quota, borrow limit, in-flight total and admitted usage, as bars."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from topogov.domain.quantity import GPU
from topogov_cli.common import (
    EXIT_OK,
    RESOURCES,
    add_api_options,
    amount,
    api_for,
    command,
    guarded,
    print_json,
    seg,
)

BAR_WIDTH = 24

LEGEND = (
    "bar = quota + borrow limit:  # admitted by Kueue  - in flight, not admitted yet (queued)\n"
    "                             . unused quota  : borrowable  > in flight beyond quota + borrow"
)


def add_parser(sub: Any) -> None:
    """Add ``teams`` to the top-level ``subparsers``."""
    teams = command(
        sub,
        "teams",
        "your teams: quota, borrow limit, in flight, admitted (as bars)",
        "Show your teams (or --team): per resource, a bar of the quota and borrow limit with what is in "
        "flight (queued + running, as the API counts it) and what Kueue has admitted.\n\n" + LEGEND,
    )
    teams.add_argument("--team", metavar="TEAM", help="only this team")
    add_api_options(teams)
    teams.set_defaults(func=run_teams)


def bar(quota: int, borrow: int, in_flight: int, admitted: int, width: int = BAR_WIDTH) -> str:
    """``[##---......::::]``: the width is quota + borrow limit; see ``LEGEND``."""
    total = quota + borrow
    if total <= 0:
        return "[" + (">" if in_flight or admitted else " ") * width + "]"

    def cells(x: int) -> int:
        n = round(min(x, total) * width / total)
        return max(n, 1) if x > 0 else n

    n_admitted = cells(admitted)
    n_flight = max(cells(max(in_flight, admitted)), n_admitted)
    n_quota = cells(quota)
    chars = []
    for i in range(width):
        if i < n_admitted:
            chars.append("#")
        elif i < n_flight:
            chars.append("-")
        elif i < n_quota:
            chars.append(".")
        else:
            chars.append(":")
    if max(in_flight, admitted) > total:
        chars[-1] = ">"
    return "[" + "".join(chars) + "]"


def team_text(view: Mapping[str, Any]) -> str:
    """A team as a few lines: namespace and queue, priority classes, and per resource a table row
    (quota, borrow limit, admitted, in flight, cap) with its bar; at most 100 columns."""
    from topogov_cli.common import table

    quota, borrow = view.get("quota") or {}, view.get("borrow_limit") or {}
    flight, admitted = view.get("in_flight") or {}, view.get("admitted") or {}
    cap = view.get("max_in_flight") or {}
    default = view.get("default_priority_class")
    classes = (
        ", ".join(f"{c} (default)" if c == default else c for c in view.get("priority_classes") or []) or "-"
    )
    head = (
        f"{view['team']}  namespace {view.get('namespace')}, queue {view.get('local_queue')}\n"
        f"  priorities  {classes}"
    )
    shown = [
        r for r in RESOURCES
        if r == GPU or any(m.get(r, 0) for m in (quota, borrow, flight, admitted))
    ]  # fmt: skip
    rows = []
    for r in shown:
        q, b, f, a = (int(m.get(r, 0)) for m in (quota, borrow, flight, admitted))
        rows.append([r, amount(r, q), f"+{amount(r, b)}", amount(r, a), amount(r, f),
                     amount(r, cap.get(r, 0)), bar(q, b, f, a)])  # fmt: skip
    body = table(["RESOURCE", "QUOTA", "BORROW", "ADMITTED", "IN FLIGHT", "CAP", ""], rows)
    text = head + "\n" + "\n".join("  " + line.rstrip() for line in body.splitlines())
    placed = placement_text(view.get("placement"))
    return text + (f"\n  placement   {placed}" if placed else "")


def placement_text(placement: Mapping[str, Any] | None) -> str | None:
    """Two lines: the share of the team's running multi-pod jobs inside one domain per layer, and the
    fleet's, e.g. ``in one domain, of 3 running multi-pod jobs: layer-1 100%, layer-2 67%`` /
    ``fleet, of 4: layer-1 100%, layer-2 50%``."""
    if not placement:
        return None
    team, fleet = placement.get("team") or {}, placement.get("fleet") or {}

    def line(who: str, q: Mapping[str, Any]) -> str:
        jobs = q.get("jobs") or 0
        if not jobs:
            return f"{who}: no running multi-pod job"
        shares = ", ".join(
            f"{lv} {round(100 * v)}%" for lv, v in sorted((q.get("in_one_domain") or {}).items())
        )
        return f"{who}, of {jobs} running multi-pod job{'s' if jobs != 1 else ''}: {shares}"

    return line("in one domain", team) + "\n" + " " * 14 + line("the fleet", fleet)


@guarded
def run_teams(args: argparse.Namespace) -> int:
    """``topogov teams``."""
    api = api_for(args)
    if args.team:
        answer = api.call("GET", f"/v1/teams/{seg(args.team)}")
        views = [answer]
    else:
        answer = api.call("GET", "/v1/teams")
        views = answer.get("teams") or []
    if args.output == "json":
        print_json(answer)
        return EXIT_OK
    if not views:
        print("you are not a principal of any team")
        return EXIT_OK
    print(LEGEND + "\n")
    print("\n\n".join(team_text(v) for v in views))
    return EXIT_OK
