"""``topogov jobs | job NAME | cancel NAME``: a team's jobs, one job's status and why, a cancel."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from topogov_cli.common import (
    EXIT_OK,
    EXIT_REFUSED,
    add_api_options,
    api_for,
    command,
    duration,
    fields,
    guarded,
    level_name,
    print_json,
    seg,
    table,
    topology_text,
    usage,
)


def add_parser(sub: Any) -> None:
    """Add ``jobs``, ``job`` and ``cancel`` to the top-level ``subparsers``."""
    jobs = command(
        sub,
        "jobs",
        "list the jobs of your teams",
        "List the jobs of your teams (or of --team): NAME, TEAM, STATE (the in-flight ledger's: "
        "submitted = charge held, released = charge given back), PRIORITY, TOPOLOGY, SUBMITTED.",
    )
    jobs.add_argument("--team", metavar="TEAM", help="only this team")
    add_api_options(jobs)
    jobs.set_defaults(func=run_jobs)

    one = command(
        sub,
        "job",
        "one job: status, why pending, placement decision, events",
        "Show one job: its status (Pending, Admitted, Running, Succeeded, Failed, Cancelled, from the "
        "Job and its Kueue Workload), why it is pending, whether its in-flight charge is held, the "
        "placement decision made at submission, and its events.",
    )
    one.add_argument("name", metavar="NAME", help="the job's name")
    one.add_argument("--team", metavar="TEAM", help="the job's team (default: found among your teams)")
    add_api_options(one)
    one.set_defaults(func=run_job)

    cancel = command(
        sub,
        "cancel",
        "cancel a job and release its in-flight share",
        "Cancel a job: delete the Job and release its in-flight charge (once; cancelling again is not "
        "an error).",
    )
    cancel.add_argument("name", metavar="NAME", help="the job's name")
    cancel.add_argument("--team", metavar="TEAM", help="the job's team (default: found among your teams)")
    add_api_options(cancel)
    cancel.set_defaults(func=run_cancel)


@guarded
def run_jobs(args: argparse.Namespace) -> int:
    """``topogov jobs``."""
    answer = api_for(args).call("GET", "/v1/jobs", query={"team": args.team})
    if args.output == "json":
        print_json(answer)
        return EXIT_OK
    items = sorted(
        answer.get("jobs") or [], key=lambda j: (j.get("team", ""), j.get("submitted_at") or "", j["name"])
    )
    if not items:
        print("no jobs" + (f" in team {args.team}" if args.team else " in your teams"))
        return EXIT_OK
    rows = [
        [j["name"], j.get("team", ""), j.get("state") or "-", j.get("priority_class") or "-",
         topology_text(j.get("topology")), j.get("submitted_at") or "-"]
        for j in items
    ]  # fmt: skip
    print(table(["NAME", "TEAM", "STATE", "PRIORITY", "TOPOLOGY", "SUBMITTED"], rows))
    return EXIT_OK


def team_of(api: Any, name: str, team: str | None) -> str:
    """``--team``, else the caller's only team, else the one of the caller's teams with a job NAME."""
    from topogov_cli.client import CliError

    if team:
        return team
    teams = [t["team"] for t in api.call("GET", "/v1/teams").get("teams") or []]
    if len(teams) == 1:
        return teams[0]
    if not teams:
        raise CliError(EXIT_REFUSED, "you are not a principal of any team")
    holding = sorted({j["team"] for j in api.call("GET", "/v1/jobs").get("jobs") or [] if j["name"] == name})
    if len(holding) == 1:
        return holding[0]
    if not holding:
        raise CliError(EXIT_REFUSED, f"no job {name!r} in your teams ({', '.join(teams)})", code="NOT_FOUND")
    raise usage(f"teams {', '.join(holding)} each have a job {name!r}: give --team")


def job_text(view: Mapping[str, Any]) -> str:
    d = view.get("decision") or {}
    topo = d.get("topology") or {}
    state = view.get("state")
    charges = {"released": "released", "submitted": "held", "reserving": "being reserved"}
    charge = charges.get(state or "", state)
    after = topo.get("fallback_after_s")
    lines = fields(
        [
            ("job", f"{view['name']}  (team {view['team']}, namespace {view.get('namespace')})"),
            ("status", view.get("status")),
            ("why pending", view.get("why_pending") if view.get("status") == "Pending" else None),
            ("charge", f"in-flight charge {charge} (ledger state {state})" if state else None),
            ("submitted", f"{view.get('submitted_at')} by {view.get('submitted_by')}"),
            ("priority", f"{d['priority_class']} ({d['priority_value']})" if d else None),
            ("pods", d.get("pods")),
            ("topology", topology_text(topo) if d else None),
            ("why", topo.get("reason")),
            ("domain then", topo.get("domain_now")),
            (
                "fallback",
                f"relaxed to preferred {level_name(topo.get('level'))} if not admitted in {duration(after)}"
                if after and not view.get("fallback")
                else None,
            ),
            (
                "fallback",
                f"relaxed to preferred at {view['fallback']['at']}: {view['fallback']['reason']}"
                if view.get("fallback")
                else None,
            ),
        ]
    )
    events = view.get("events") or []
    if events:
        lines += "\n\nevents"
        for e in events:
            extra = ", ".join(
                f"{k} {topology_text(v) if k == 'topology' and isinstance(v, dict) else v}"
                for k, v in e.items()
                if k not in ("at", "what")
            )
            lines += f"\n  {e.get('at', '-')}  {e.get('what', '-')}" + (f"  ({extra})" if extra else "")
    return lines


@guarded
def run_job(args: argparse.Namespace) -> int:
    """``topogov job NAME``."""
    api = api_for(args)
    team = team_of(api, args.name, args.team)
    view = api.call("GET", f"/v1/jobs/{seg(team)}/{seg(args.name)}")
    if args.output == "json":
        print_json(view)
    else:
        print(job_text(view))
    return EXIT_OK


@guarded
def run_cancel(args: argparse.Namespace) -> int:
    """``topogov cancel NAME``."""
    api = api_for(args)
    team = team_of(api, args.name, args.team)
    answer = api.call("DELETE", f"/v1/jobs/{seg(team)}/{seg(args.name)}")
    if args.output == "json":
        print_json(answer)
        return EXIT_OK
    job = "Job deleted" if answer.get("job_deleted") else "the Job was already gone"
    charge = (
        "in-flight charge released"
        if answer.get("charge_released")
        else "its in-flight charge had already been released"
    )
    print(f"cancelled {args.name} (team {team}): {job}; {charge}")
    return EXIT_OK
