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
    terminal_width,
    topology_text,
    usage,
)
from topogov_cli.render import fitted_table


def add_parser(sub: Any) -> None:
    """Add ``jobs``, ``job`` and ``cancel`` to the top-level ``subparsers``."""
    jobs = command(
        sub,
        "jobs",
        "list the jobs of your teams",
        "List the jobs of your teams (or of --team): NAME, TEAM, STATUS (as `topogov job` shows it: "
        "Pending, Admitted, Running, Succeeded, Failed, Cancelled, Vanished), CHARGE (the in-flight "
        "charge: held or released), PRIORITY (the class without its '-priority' suffix), TOPOLOGY "
        "(what it asked; 'relaxed layer-N' once a fallback relaxed a required level to preferred), "
        "PLACEMENT (where its pods run: the deepest layer holding them all in one domain and how the "
        "next splits them, e.g. layer-3 ×1, layer-2 ×1 (3 × L3)), AGE (since submission; --output "
        "json has the time). Finished jobs are listed until their records expire (teams.yaml "
        "jobRetentionDays); the API answers a page at a time and every page is read.",
    )
    jobs.add_argument("--team", metavar="TEAM", help="only this team")
    jobs.add_argument("--limit", metavar="N", type=_positive, help="at most N jobs (in team and name order)")
    add_api_options(jobs)
    jobs.set_defaults(func=run_jobs)

    one = command(
        sub,
        "job",
        "one job: status, why pending, where it landed, events",
        "Show one job: its status (Pending, Admitted, Running, Succeeded, Failed, Cancelled, from the "
        "Job and its Kueue Workload), Kueue's reason while it is pending, whether its in-flight "
        "charge is held, the topology decision made at submission, where its pods landed (nodes and "
        "their network domains, the tightest layer holding them all), and its events (Topogov's and "
        "Kueue's: quota reserved, admitted, evicted, preempted, finished).",
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


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


@guarded
def run_jobs(args: argparse.Namespace) -> int:
    """``topogov jobs``."""
    answer = {"jobs": api_for(args).all_jobs(args.team, args.limit)}
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
        [name_text(j), j.get("team", ""), j.get("status") or "-", CHARGES.get(j.get("state") or "", "-"),
         (j.get("priority_class") or "-").removesuffix("-priority"), asked_text(j),
         j.get("placement") or "-", eta_text(j.get("eta")), age(j.get("submitted_at"))]
        for j in items
    ]  # fmt: skip
    headers = ["NAME", "TEAM", "STATUS", "CHARGE", "PRIORITY", "TOPOLOGY", "PLACEMENT", "ETA", "AGE"]
    if any((j.get("kind") or "Job") != "Job" for j in items):  # a column only when the kinds differ
        headers.insert(1, "KIND")
        for row, j in zip(rows, items, strict=True):
            row.insert(1, j.get("kind") or "Job")
    print(fitted_table(headers, rows, terminal_width(), optional=("CHARGE", "AGE", "ETA")))
    for note in read_only_notes(items):
        print(note)
    return EXIT_OK


def name_text(job: Mapping[str, Any]) -> str:
    """The job's name; ``*`` after a job shown read-only (submitted outside Topogov)."""
    return f"{job['name']} *" if job.get("read_only") else str(job["name"])


def read_only_notes(items: list[Mapping[str, Any]]) -> list[str]:
    """One line per kind of read-only job listed: what it is and that Topogov never changes it."""
    kinds = sorted({(str(j.get("kind")), str(j.get("submitted_with"))) for j in items if j.get("read_only")})
    return [
        f"* a {kind} (submitted with `{made}`): shown read-only; Topogov never charges, changes or cancels it"
        for kind, made in kinds
    ]


def asked_text(job: Mapping[str, Any]) -> str:
    """``required layer-2``, or ``relaxed layer-2`` once the fallback relaxed it to preferred."""
    topo = job.get("topology") or {}
    if job.get("fallback_at") and topo.get("level"):
        return f"relaxed {level_name(topo['level'])}"
    return topology_text(topo)


def age(stamp: str | None) -> str:
    """Time since ``stamp`` as kubectl shows ages: 45s, 12m, 3h, 5d."""
    import datetime as dt

    if not stamp:
        return "-"
    try:
        then = dt.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)
    except ValueError:
        return stamp
    s = max(0, int((dt.datetime.now(dt.UTC) - then).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size * (2 if unit != "m" else 1):
            return f"{s // size}{unit}"
    return f"{s}s"


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
    holding = sorted({j["team"] for j in api.all_jobs() if j["name"] == name})
    if len(holding) == 1:
        return holding[0]
    if not holding:
        raise CliError(EXIT_REFUSED, f"no job {name!r} in your teams ({', '.join(teams)})", code="NOT_FOUND")
    raise usage(f"teams {', '.join(holding)} each have a job {name!r}: give --team")


CHARGES = {"released": "released", "submitted": "held", "reserving": "reserving"}
MAX_NODE_ROWS = 12


def verdict_text(placement: Mapping[str, Any] | None, asked: str | None) -> str | None:
    """``layer-2 ×1 (3 × L3), inside the layer-2 it asked for``."""
    if not placement or not placement.get("verdict"):
        return None
    inside = placement.get("inside_asked")
    if inside is None or not asked:
        return placement["verdict"]
    where = "inside" if inside else "NOT inside"
    return f"{placement['verdict']}, {where} the {level_name(asked)} it asked for"


def landed_text(placement: Mapping[str, Any] | None) -> str | None:
    """``10 pods on 3 nodes, one layer-3 domain (nn-...)``, from the API's ``placement``."""
    if not placement or not placement.get("pods"):
        return None
    phases = ", ".join(f"{n} {phase}" for phase, n in (placement.get("phases") or {}).items())
    placed, pods, nodes = placement.get("placed", 0), placement["pods"], placement.get("nodes", 0)
    text = f"{placed} of {pods} pods on {nodes} node{'s' if nodes != 1 else ''}"
    tight = placement.get("tightest")
    spread = [f"{d['domains']} {level_name(d['level'])} domains" for d in placement.get("domains") or []]
    if tight:
        text += f", one {level_name(tight['level'])} domain ({tight['domain']})"
    elif spread and placed:
        text += ", spread over " + ", ".join(s for s in spread if not s.startswith("1 "))
    return f"{text}  [{phases}]" if phases else text


def ranges(indexes: list[int]) -> str:
    """``0-3,7,9-10`` for a job's completion indexes."""
    out: list[str] = []
    for i in sorted(indexes):
        if out and "-" not in out[-1].rsplit(",", 1)[-1] and int(out[-1]) == i - 1:
            out[-1] = f"{out[-1]}-{i}"
        elif out and "-" in out[-1] and int(out[-1].rsplit("-", 1)[1]) == i - 1:
            out[-1] = f"{out[-1].rsplit('-', 1)[0]}-{i}"
        else:
            out.append(str(i))
    return ",".join(out)


def domain_rows(placement: Mapping[str, Any], max_nodes: int = 16) -> list[str]:
    """Where a job's pods are, as a small tree: the layers all its nodes share (once), each deepest
    domain with its nodes and pods (completion indexes), and each node's pods when the job is on at
    most ``max_nodes`` nodes. Every node, one by one: ``--output json`` (``placement.by_node``)."""
    rows = placement.get("by_node") or []
    depth = max((len(r.get("path") or []) for r in rows), default=0)
    groups: dict[tuple[str, ...], list[Mapping[str, Any]]] = {}
    for r in rows:
        groups.setdefault(tuple(r.get("path") or ()), []).append(r)
    paths = list(groups)
    shared = 0
    while shared < depth - 1 and all(len(p) > shared and p[shared] == paths[0][shared] for p in paths):
        shared += 1
    lines = []
    if shared:
        lines.append("  " + " > ".join(f"layer-{i + 1} {paths[0][i]}" for i in range(shared)))
    for shown, (path, group) in enumerate(sorted(groups.items())):
        if shown == MAX_NODE_ROWS:
            lines.append(f"  ... {len(groups) - shown} more domains (--output json lists every node)")
            break
        below = " > ".join(f"layer-{i + 1} {path[i]}" for i in range(shared, len(path))) or "(no topology)"
        pods = sum(r["pods"] for r in group)
        idx = ranges([i for r in group for i in r.get("indexes") or []])
        nodes = f"{len(group)} node{'s' if len(group) != 1 else ''}"
        lines.append(
            f"    {below}  {nodes}, {pods} pod{'s' if pods != 1 else ''}" + (f" ({idx})" if idx else "")
        )
        if len(rows) <= max_nodes:
            for r in group:
                lines.append(
                    f"      {r['node']}" + (f"  pods {ranges(r['indexes'])}" if r.get("indexes") else "")
                )
    if placement.get("unknown_nodes"):
        lines.append(f"  not in the topology snapshot yet: {', '.join(placement['unknown_nodes'])}")
    return lines


def wrapped(text: str, indent: int) -> str:
    """``text`` wrapped to the terminal (not for a pipe), continuation lines indented by ``indent``."""
    import textwrap

    columns = terminal_width()
    if not columns:
        return text
    lines = textwrap.wrap(text, columns - indent, break_on_hyphens=False, break_long_words=False)
    return ("\n" + " " * indent).join(lines)


def event_line(e: Mapping[str, Any]) -> str:
    if str(e.get("what", "")).startswith("kueue: "):
        reason = f" ({e['reason']})" if e.get("reason") not in (None, "", e["what"][7:]) else ""
        head = f"  {e.get('at', '-')}  {e['what']}{reason}"
        if not e.get("message"):
            return head
        return f"{head}\n{' ' * 24}{wrapped(e['message'], 24)}"
    extra = ", ".join(
        f"{k} {topology_text(v) if k == 'topology' and isinstance(v, dict) else v}"
        for k, v in e.items()
        if k not in ("at", "what")
    )
    return f"  {e.get('at', '-')}  {e.get('what', '-')}" + (f"  ({extra})" if extra else "")


def relaxed(view: Mapping[str, Any]) -> str:
    fb = view.get("fallback") or {}
    return f", relaxed to preferred {level_name(fb.get('level'))} at {fb['at']}" if fb.get("at") else ""


def waiting_lines(w: Mapping[str, Any]) -> list[str]:
    """What a pending job waits for: the closest domain, what runs there, what would have to go."""

    def who(j: Mapping[str, Any]) -> str:
        what = f"{j.get('team')}'s {j['job']}" if j.get("job") else f"a {j.get('team')} job"
        return f"{what} ({j['gpus']} GPUs, {j.get('priority_class') or '-'})"

    out = [
        "waiting",
        f"  closest    {w['level']} domain {w['domain']} ({w['nodes']} nodes): holds {w['pods_now']} of "
        f"{w['pods']} pods now",
    ]
    if w.get("occupants"):
        out.append("  occupied   " + wrapped("; ".join(who(j) for j in w["occupants"]), 13))
    if w.get("unavailable_nodes"):
        n = w["unavailable_nodes"]
        nodes = f"{n} node{'s' if n != 1 else ''}"
        out.append(f"  unusable   {nodes} not Ready, cordoned or tainted: Kueue leaves them out")
    if w.get("to_free") is not None and w["to_free"]:
        parts = [
            f"{who(j)}{' - lower priority, preemptible' if j.get('lower_priority') else ''}"
            for j in w["to_free"]
        ]
        out.append(
            "  to fit     " + wrapped("these would have to finish or be preempted: " + "; ".join(parts), 13)
        )
    elif w.get("to_free") is not None:
        out.append("  to fit     it fits there by capacity now: what holds it is quota or Kueue's queue")
    return out


def _who(j: Mapping[str, Any]) -> str:
    return f"{j.get('team')}'s {j['job']}" if j.get("job") else f"a {j.get('team')} job"


def _names(jobs: list[Mapping[str, Any]]) -> str:
    """``team-c's c-exp and 3 team-a jobs``: the jobs the caller may see by name, the others counted
    per team."""
    hidden: dict[str, int] = {}
    names = []
    for j in jobs:
        if j.get("job"):
            names.append(_who(j))
        else:
            hidden[str(j.get("team"))] = hidden.get(str(j.get("team")), 0) + 1
    names += [f"a {t} job" if n == 1 else f"{n} {t} jobs" for t, n in sorted(hidden.items())]
    if not names:
        return "-"
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def eta_text(eta: Mapping[str, Any] | None) -> str:
    """The ``ETA`` column: ``in 8m``, ``now``, ``?`` (no estimate) or ``-``."""
    if not eta:
        return "-"
    start = eta.get("start_in_s")
    if start is None:
        return "?"
    return "now" if start <= 0 else f"in {duration(start)}"


def estimate_lines(e: Mapping[str, Any]) -> list[str]:
    """A pending job's estimated start: when, where, once what ends, on what basis; never a promise."""
    out = ["estimate"]
    if e.get("error"):
        return [*out, "  start      " + wrapped(f"none: {e['error']}", 13)]
    start = e.get("start_in_s")
    domain = e.get("domain") or {}
    where = f" in {domain['domain']} (layer-{domain['layer']})" if domain else ""
    if start is None:
        unknown = e.get("unknown_ends") or []
        why = (
            f"it depends on {_names(unknown)}, whose end nothing tells" if unknown else "not within two weeks"
        )
        if e.get("stopped_queue"):
            why = f"ClusterQueue {e['stopped_queue']} is stopped: nothing starts there until it is resumed"
        out.append("  start      " + wrapped(f"none: {why}", 13))
    else:
        when = "now" if start <= 0 else f"in {duration(start)} ({e.get('start_at')})"
        once = f", once {_names(e['waits_for'])} finish" if e.get("waits_for") else ""
        fallback = ", after its fallback to preferred" if e.get("after_fallback") else ""
        out.append("  start      " + wrapped(f"{when}{once}{where}{fallback}", 13))
    if e.get("preempts"):
        out.append("  preempts   " + wrapped(_names(e["preempts"]), 13))
    for alt in e.get("alternatives") or []:
        by = f", preempting {_names(alt['preempts'])}" if alt.get("preempts") else ""
        out.append(f"  or         start now as {level_name(alt['topology'])}{by}")
    known = [b for b in e.get("bases") or [] if b.get("expected_s")]
    bases = [f"{_who(b)}: {duration(b['expected_s'])} ({b['basis']})" for b in known]
    mine = e.get("expected_duration") or {}
    if mine.get("seconds"):
        bases.insert(0, f"this job: {duration(mine['seconds'])} ({mine['basis']})")
    unknown = [b for b in e.get("bases") or [] if not b.get("expected_s")]
    if unknown:
        bases.append(f"not known for {_names(unknown)}")
    if bases:
        out.append("  run times  " + wrapped("; ".join(bases), 13))
    count = e.get("overdue_count", len(e.get("overdue") or []))
    if count:
        named = f" (on its way: {_names(e['overdue'])})" if e.get("overdue") else ""
        jobs = "1 running job ran past its" if count == 1 else f"{count:,} running jobs ran past their"
        out.append("  overdue    " + wrapped(f"{jobs} expected end: taken to end now{named}", 13))
    age = e.get("nodes_as_of_s")
    nodes = f"; node data last changed {duration(age)} ago" if age is not None else ""
    run = f"; estimated {duration(e['forecast_age_s'])} ago" if e.get("forecast_age_s") else ""
    out.append("  assumes    " + wrapped(f"{e.get('assumes')}{nodes}{run}", 13))
    return out


def pods_text(d: Mapping[str, Any]) -> str:
    """``4`` or, for a job of several pod sets, ``4 (master 1 × 8 GPUs, worker 3 × 8 GPUs)``."""
    sets = d.get("pod_sets") or []
    if len(sets) < 2:
        return str(d.get("pods"))
    parts = ", ".join(f"{p['name']} {p['pods']} × {p['gpus_per_pod']} GPUs" for p in sets)
    return f"{d.get('pods')} ({parts})"


def job_text(view: Mapping[str, Any]) -> str:
    d = view.get("decision") or {}
    topo = d.get("topology") or {}
    state = view.get("state")
    charge = CHARGES.get(state or "", state)
    after = topo.get("fallback_after_s")
    lines = fields(
        [
            ("job", f"{view['name']}  (team {view['team']}, namespace {view.get('namespace')})"),
            ("kind", d.get("kind") or view.get("kind")),
            ("status", view.get("status")),
            ("why pending", view.get("why_pending") if view.get("status") == "Pending" else None),
            ("charge", f"in-flight charge {charge} (ledger state {state})" if state else None),
            ("submitted", f"{view.get('submitted_at')} by {view.get('submitted_by')}"),
            ("priority", f"{d['priority_class']} ({d['priority_value']})" if d else None),
            ("pods", pods_text(d) if d else None),
            ("landed", landed_text(view.get("placement"))),
            ("placement", verdict_text(view.get("placement"), topo.get("level"))),
            ("topology", (topology_text(topo) + relaxed(view)) if d else None),
            ("why", topo.get("reason")),
            # where the API saw room at submission; once placed, "landed" says where Kueue put it
            ("fit then", None if (view.get("placement") or {}).get("placed") else topo.get("domain_now")),
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
    waiting = view.get("waiting")
    if waiting and view.get("status") == "Pending":
        lines += "\n\n" + "\n".join(waiting_lines(waiting))
    estimate = view.get("estimate")
    if estimate and view.get("status") == "Pending":
        lines += "\n\n" + "\n".join(estimate_lines(estimate))
    placement = view.get("placement") or {}
    if placement.get("by_node"):
        lines += "\n\nwhere\n" + "\n".join(domain_rows(placement))
    events = view.get("events") or []
    if events:
        lines += "\n\nevents\n" + "\n".join(event_line(e) for e in events)
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
    kind = answer.get("kind") or "Job"
    job = f"{kind} deleted" if answer.get("job_deleted") else f"the {kind} was already gone"
    charge = (
        "in-flight charge released"
        if answer.get("charge_released")
        else "its in-flight charge had already been released"
    )
    print(f"cancelled {args.name} (team {team}): {job}; {charge}")
    return EXIT_OK
