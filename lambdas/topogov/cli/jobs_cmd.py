"""``topogov submit | jobs | job | cancel | teams`` and the API side of ``topogov topology``: the
data scientist's commands, one signed REST call each (``topogov.cli.client``), the same against the
local stack and a deployed one.

This module imports only the standard library at load time (``topogov --help`` stays fast); the
HTTP client, botocore and YAML load when a command runs.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import textwrap
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote

from topogov.cli.main import ENDPOINT_HELP, EXIT_CODES_HELP, EXIT_OK, EXIT_REFUSED, EXIT_USAGE

GPU, EFA, CPU, MEMORY = "nvidia.com/gpu", "vpc.amazonaws.com/efa", "cpu", "memory"
RESOURCES = (GPU, EFA, CPU, MEMORY)
LEVEL_PREFIX = "topology.k8s.aws/network-node-"
BAR_WIDTH = 30
LEGEND = (
    "bar = quota + borrow limit:  # admitted by Kueue   - in flight, not admitted yet (queued)   "
    ". unused quota   : borrowable   > in flight beyond quota + borrow"
)

# Flags of the high-level job (JobRequest fields, named as `hyp create hyp-pytorch-job` parameters).
HIGH_LEVEL = (
    "job_name", "image", "command", "args", "environment", "instance_type", "node_count", "replica_count",
    "tasks_per_node", "accelerators", "vcpu", "memory", "efa", "priority", "max_retry", "queue_name",
    "namespace",
)  # fmt: skip


def _flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


# -- argument types (argparse turns a ValueError/ArgumentTypeError into a usage error, exit 2) -------
def words(text: str) -> list[str]:
    """``--command``/``--args``: a JSON list of strings (``'["python", "train.py"]'``, as ``hyp``
    takes it), a bracketed comma list (``[python, train.py]``), or words split like a shell would
    (``"python train.py --epochs 10"``)."""
    stripped = text.strip()
    if stripped.startswith("["):
        try:
            value = json.loads(stripped)
        except ValueError:
            if not stripped.endswith("]"):
                raise argparse.ArgumentTypeError(f"not a JSON list: {text!r}") from None
            value = [w.strip().strip("'\"") for w in stripped[1:-1].split(",") if w.strip()]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise argparse.ArgumentTypeError(f"must be a list of strings: {text!r}")
        return value
    try:
        return shlex.split(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{exc}: {text!r}") from None


def env_pairs(text: str) -> dict[str, str]:
    """``--environment``: ``KEY=VALUE`` (repeatable) or a JSON object (``'{"KEY": "VALUE"}'``)."""
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            value = json.loads(stripped)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a JSON object: {text!r}") from None
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            raise argparse.ArgumentTypeError(f"must map names to strings: {text!r}")
        return value
    key, sep, val = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return {key: val}


def tasks_per_node(text: str) -> int | str:
    if text in ("auto", "cpu", "gpu"):
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"an integer, auto, cpu or gpu, not {text!r}") from None


# -- parsers ------------------------------------------------------------------------------------------
def add_api_options(parser: argparse.ArgumentParser, output: bool = True) -> None:
    """``--endpoint``, ``--region``, ``--profile`` (and ``--output``) on a command that calls the API."""
    group = parser.add_argument_group("API and credentials")
    group.add_argument("--endpoint", metavar="URL", help="the API's base URL (see 'endpoint' below)")
    group.add_argument(
        "--region",
        metavar="REGION",
        help="SigV4 region (default: from an execute-api URL, the config file, AWS_REGION, the "
        "profile, else us-east-1)",
    )
    group.add_argument("--profile", metavar="PROFILE", help="AWS profile (default: $AWS_PROFILE)")
    if output:
        group.add_argument(
            "--output",
            choices=("text", "json"),
            default="text",
            help="text (default) or json: the API's raw JSON answer, for scripts",
        )


def _command(sub: Any, name: str, summary: str, description: str, extra: str = "") -> argparse.ArgumentParser:
    epilog = "\n\n".join(part for part in (extra.strip("\n"), EXIT_CODES_HELP, ENDPOINT_HELP) if part)
    parser = sub.add_parser(
        name,
        help=summary,
        description="\n\n".join(textwrap.fill(p, 100) for p in description.split("\n\n")),
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.set_defaults(cli_prog=f"topogov {name}")
    return parser


SUBMIT_EXAMPLES = """examples:
  topogov submit --job-name llm --image pytorch:2.5 --accelerators 8 --efa 32 --replica-count 4 \\
                 --required-topology layer-3 --fallback-after 15m
  topogov submit --job-name llm --image pytorch:2.5 --accelerators 8 --node-count 4 --topology auto --dry-run
  topogov submit -f job.yaml                 # a batch/v1 Job, kept as written (queue, priority, annotations)
  topogov submit --job-name x --image y --vcpu 4 --command "python train.py" --args="--epochs 10" \\
                 --environment NCCL_DEBUG=INFO --environment WANDB_MODE=offline

--command/--args take a JSON list ('["python", "train.py"]', as hyp does) or words split like a shell
("python train.py"); write --args="--epochs 10" when the value starts with '-'.
--environment takes KEY=VALUE (repeatable) or a JSON object. --memory is in GiB.
Levels: layer-1 .. layer-4, hostname, or the full label key."""


def add_parsers(sub: Any) -> None:
    """Add submit, jobs, job, cancel and teams to the top-level ``subparsers``."""
    s = _command(
        sub,
        "submit",
        "submit a job: flags of `hyp create hyp-pytorch-job`, or -f a Job manifest",
        "Submit a job to the team's queue. The API decides the team, the priority and the topology "
        "annotation, checks the team's quota and in-flight cap, and says why; this prints that "
        "decision (team, queue, priority, pods, topology and why, the quota arithmetic).",
        SUBMIT_EXAMPLES,
    )
    job = s.add_argument_group("the job (names of `hyp create hyp-pytorch-job`)")
    job.add_argument(
        "--job-name", metavar="NAME", help="the Job's name (a DNS-1123 label); needed without -f"
    )
    job.add_argument("--image", help="container image; required without -f")
    job.add_argument("--command", type=words, metavar="CMD", help="the container's command (see below)")
    job.add_argument("--args", type=words, metavar="ARGS", help="its arguments (see below)")
    job.add_argument(
        "--environment", type=env_pairs, action="append", metavar="KEY=VALUE", help="repeatable, or JSON"
    )
    job.add_argument("--instance-type", metavar="TYPE", help="e.g. p5.48xlarge (a node selector)")
    count = job.add_mutually_exclusive_group()
    count.add_argument("--node-count", type=int, metavar="N", help="pods, one per node")
    count.add_argument("--replica-count", type=int, metavar="N", help="pods (default 1)")
    job.add_argument("--tasks-per-node", type=tasks_per_node, metavar="N", help="integer, auto, cpu or gpu")
    job.add_argument("--accelerators", type=int, metavar="N", help="GPUs per pod")
    job.add_argument("--vcpu", type=float, metavar="N", help="vCPUs per pod")
    job.add_argument("--memory", type=float, metavar="GIB", help="memory per pod, GiB")
    job.add_argument("--efa", type=int, metavar="N", help="EFA devices per pod")
    job.add_argument("--priority", metavar="CLASS", help="priority class (default: the team's)")
    job.add_argument("--max-retry", type=int, metavar="N", help="the Job's backoffLimit")
    job.add_argument("--queue-name", metavar="QUEUE", help="must be the team's LocalQueue (default: it)")
    job.add_argument("--namespace", metavar="NS", help="the team's namespace (names the team)")
    topo = s.add_argument_group("topology")
    mode = topo.add_mutually_exclusive_group()
    mode.add_argument("--preferred-topology", metavar="LEVEL", help="one domain of LEVEL if possible")
    mode.add_argument("--required-topology", metavar="LEVEL", help="all pods in one domain of LEVEL, or wait")
    mode.add_argument(
        "--topology",
        choices=("auto", "none"),
        help="auto: the API picks the tightest level that holds the job (as preferred); none: no topology",
    )
    topo.add_argument(
        "--fallback-after",
        metavar="DURATION",
        help="with --required-topology: relax to preferred if not admitted after this long (15m, 1h30m)",
    )
    how = s.add_argument_group("submission")
    how.add_argument(
        "-f", "--file", metavar="JOB.yaml", help="a batch/v1 Job manifest, YAML or JSON ('-' for stdin)"
    )
    how.add_argument("--team", metavar="TEAM", help="the team (default: your only team)")
    how.add_argument("--dry-run", action="store_true", help="decide and explain; create and charge nothing")
    how.add_argument(
        "--idempotency-key", metavar="KEY", help="a retry with the same key returns the first answer"
    )
    add_api_options(s)
    s.set_defaults(func=run_submit)

    jobs = _command(
        sub,
        "jobs",
        "list the jobs of your teams",
        "List the jobs of your teams (or of --team): NAME, TEAM, STATE (the in-flight ledger's: "
        "submitted = charge held, released = charge given back), PRIORITY, TOPOLOGY, SUBMITTED.",
    )
    jobs.add_argument("--team", metavar="TEAM", help="only this team")
    add_api_options(jobs)
    jobs.set_defaults(func=run_jobs)

    one = _command(
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

    cancel = _command(
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

    teams = _command(
        sub,
        "teams",
        "your teams: quota, borrow limit, in flight, admitted (as bars)",
        "Show your teams (or --team): per resource, a bar of the quota and borrow limit with what is in "
        "flight (queued + running, as the API counts it) and what Kueue has admitted.\n\n" + LEGEND,
    )
    teams.add_argument("--team", metavar="TEAM", help="only this team")
    add_api_options(teams)
    teams.set_defaults(func=run_teams)


# -- plumbing -----------------------------------------------------------------------------------------
def _prog(args: argparse.Namespace) -> str:
    # not args.command: submit's --command shares that name with the subcommand's dest
    return getattr(args, "cli_prog", None) or "topogov"


def usage(message: str) -> Exception:
    from topogov.cli.client import CliError

    return CliError(EXIT_USAGE, message)


def report(args: argparse.Namespace, exc: Any) -> None:
    """One line on stderr (``topogov CMD: ...``) and the API's details under it; with
    ``--output json`` the API's error body goes to stdout as well."""
    prog = _prog(args)
    if exc.exit_code == EXIT_USAGE and exc.body is None:
        print(f"{prog}: error: {exc.message} (see '{prog} --help')", file=sys.stderr)
        return
    if getattr(args, "output", "text") == "json" and exc.body is not None:
        print(json.dumps(exc.body, indent=2))
    print(f"{prog}: {exc.message}", file=sys.stderr)
    for line in detail_lines(exc.details, exc.code):
        print("  " + line, file=sys.stderr)


def guarded(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        from topogov.cli.client import CliError

        try:
            return fn(args)
        except CliError as exc:
            report(args, exc)
            return exc.exit_code

    run.__doc__ = fn.__doc__
    return run


def api_for(args: argparse.Namespace) -> Any:
    from topogov.cli.client import Api, resolve_endpoint

    return Api(resolve_endpoint(args.endpoint), profile=args.profile, region_flag=args.region)


def _seg(text: str) -> str:
    return quote(text, safe="")


def print_json(doc: Any) -> None:
    print(json.dumps(doc, indent=2))


# -- formatting -----------------------------------------------------------------------------------------
def level_name(level: str | None) -> str:
    if not level:
        return "-"
    if level.startswith(LEVEL_PREFIX):
        return level[len(LEVEL_PREFIX) :]
    return {"kubernetes.io/hostname": "hostname"}.get(level, level)


def is_level(text: str) -> bool:
    return text.startswith(LEVEL_PREFIX) or text == "kubernetes.io/hostname"


def topology_text(topo: Mapping[str, Any] | None) -> str:
    if not topo or topo.get("mode") in (None, "none"):
        return "none"
    return f"{topo['mode']} {level_name(topo.get('level'))}"


def duration(seconds: int) -> str:
    h, rest = divmod(int(seconds), 3600)
    m, s = divmod(rest, 60)
    return "".join(f"{v}{u}" for v, u in ((h, "h"), (m, "m"), (s, "s")) if v) or "0s"


def amount(resource: str, value: Any) -> str:
    """A quantity as people read it: CPU in cores (the API counts millicores), memory in Gi/Ti
    (it counts bytes), devices as counts."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return str(value)
    if resource == CPU:
        return f"{value / 1000:g}"
    if resource == MEMORY:
        for unit, size in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20)):
            if abs(value) >= size:
                return f"{round(value / size, 1):g}{unit}"
        return f"{value}"
    return f"{value:g}" if isinstance(value, float) else str(value)


def table(headers: list[str], rows: Iterable[Iterable[Any]]) -> str:
    from topogov.cli.render import table as render_table

    return render_table(headers, [list(r) for r in rows])


def fields(pairs: Iterable[tuple[str, Any]]) -> str:
    pairs = [(k, v) for k, v in pairs if v not in (None, "")]
    width = max((len(k) for k, _ in pairs), default=0)
    return "\n".join(f"{k.ljust(width)}  {v}" for k, v in pairs)


def detail_lines(details: Mapping[str, Any], code: str | None) -> list[str]:
    """The API's ``details`` as lines: tables for lists of records, ``key: value`` otherwise, and a
    hint of what to try for the refusals that say what would work."""
    lines: list[str] = []
    for key, value in details.items():
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            headers = list(dict.fromkeys(k for v in value for k in v))
            rows = [[amount(v.get("resource", ""), v.get(h, "")) for h in headers] for v in value]
            lines.extend(table([h.replace("_", " ").upper() for h in headers], rows).splitlines())
        elif isinstance(value, list):
            lines.append(f"{key.replace('_', ' ')}: {', '.join(str(v) for v in value) or '-'}")
        elif isinstance(value, dict) and all(isinstance(v, list) for v in value.values()):
            for sub, items in value.items():  # e.g. the levels of each flavor
                lines.append(f"{key.replace('_', ' ')} of {sub}: {', '.join(str(v) for v in items) or '-'}")
        elif isinstance(value, dict):
            lines.append(f"{key.replace('_', ' ')}: {json.dumps(value)}")
        else:
            shown = level_name(value) if isinstance(value, str) and is_level(value) else value
            lines.append(f"{key.replace('_', ' ')}: {shown}")
    if code == "TOPOLOGY_INFEASIBLE":
        would = details.get("tightest_level_that_holds")
        if isinstance(details.get("levels"), dict):
            lines.append("try: a level of that list, or another --instance-type")
        elif would:
            lines.append(f"try: --required-topology {level_name(would)}, or --topology auto")
        else:
            lines.append("try: fewer pods, --preferred-topology, or --topology none")
    elif code == "PRIORITY_NOT_ALLOWED" and details.get("allowed"):
        lines.append(f"try: --priority {details['allowed'][0]}, or leave it out ({details.get('default')})")
    return lines


# -- submit -------------------------------------------------------------------------------------------
def _read_manifest(path: str) -> dict[str, Any]:
    import yaml

    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise usage(f"cannot read {path}: {exc}") from None
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        raise usage(f"{path} is not YAML or JSON: {str(exc).splitlines()[0]}") from None
    if len(docs) != 1 or not isinstance(docs[0], dict):
        raise usage(f"{path} must hold exactly one Job manifest (a mapping)")
    # YAML timestamps (creationTimestamp: ...) become strings, as the API takes them.
    return json.loads(json.dumps(docs[0], default=str))


def submission(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, str], dict[str, str]]:
    """The request ``topogov submit`` sends: (JSON body, query, headers). Argument combinations that
    can never be right are usage errors here; everything else is the API's to judge."""
    if args.fallback_after and not args.required_topology:
        raise usage("--fallback-after needs --required-topology LEVEL")
    topology: dict[str, Any] | None = None
    if args.topology:
        topology = {"mode": args.topology}
    elif args.fallback_after:
        topology = {"mode": "required", "level": args.required_topology, "fallbackAfter": args.fallback_after}
    if args.file:
        given = [_flag(k) for k in HIGH_LEVEL if getattr(args, k) is not None]
        if given:
            raise usage(f"-f takes a whole manifest; {', '.join(given)} cannot be combined with it")
        if topology is None and args.required_topology:
            topology = {"mode": "required", "level": args.required_topology}
        if topology is None and args.preferred_topology:
            topology = {"mode": "preferred", "level": args.preferred_topology}
        body: dict[str, Any] = {"manifest": _read_manifest(args.file)}
        if topology is not None:
            body["topology"] = topology
    else:
        missing = [f for f in ("--job-name", "--image") if getattr(args, f[2:].replace("-", "_")) is None]
        if missing:
            verb = "is" if len(missing) == 1 else "are"
            raise usage(f"{' and '.join(missing)} {verb} required (or -f JOB.yaml)")
        body = {k: getattr(args, k) for k in HIGH_LEVEL if getattr(args, k) is not None}
        if args.environment:
            body["environment"] = {k: v for pair in args.environment for k, v in pair.items()}
        if topology is not None:
            body["topology"] = topology
        elif args.required_topology:
            body["required_topology"] = args.required_topology
        elif args.preferred_topology:
            body["preferred_topology"] = args.preferred_topology
    if args.team:
        body["team"] = args.team
    query = {"dryRun": "true"} if args.dry_run else {}
    headers = {"Idempotency-Key": args.idempotency_key} if args.idempotency_key else {}
    return body, query, headers


def decision_text(answer: Mapping[str, Any], in_flight_now: Mapping[str, int] | None = None) -> str:
    """A submission's answer as people read it: what happened, the decision, the quota arithmetic."""
    d = answer["decision"]
    name = ((answer.get("job") or {}).get("metadata") or {}).get("name", "?")
    if answer.get("dry_run"):
        head = f"dry run: {name} would be accepted for team {d['team']}; nothing was created or charged"
    else:
        head = (
            f"submitted {name} for team {d['team']}: Job {d['namespace']}/{name} created, "
            "suspended until Kueue admits it"
        )
    topo = d.get("topology") or {}
    fallback = None
    if topo.get("fallback_after_s"):
        fallback = (
            f"relaxed to preferred {level_name(topo.get('level'))} if not admitted within "
            f"{duration(topo['fallback_after_s'])}"
        )
    domain_now = topo.get("domain_now")
    if topo.get("mode") not in (None, "none") and not domain_now:
        domain_now = "none has room now: the job queues until one does"
    info = fields(
        [
            ("team", d["team"]),
            ("queue", f"{d['namespace']}/{d['local_queue']}"),
            ("priority", f"{d['priority_class']} ({d['priority_value']})"),
            ("pods", d["pods"]),
            ("topology", topology_text(topo)),
            ("why", topo.get("reason")),
            ("domain now", domain_now),
            ("fallback", fallback),
        ]
    )
    rows = []
    lines = d.get("quota") or []
    for q in [q for q in lines if q["asked"]] or lines:  # what the job asks for
        res = q["resource"]
        before = q.get("in_flight_before")
        if before is None and in_flight_now is not None and res in in_flight_now:
            before = in_flight_now[res] - q["asked"]
        flight = "-" if before is None else f"{amount(res, before)} -> {amount(res, before + q['asked'])}"
        rows.append(
            [res, amount(res, q["asked"]), amount(res, q["quota"]), amount(res, q["borrow_limit"]), flight,
             amount(res, q["in_flight_cap"])]
        )  # fmt: skip
    quota = table(["RESOURCE", "ASKED", "QUOTA", "BORROW LIMIT", "IN FLIGHT (BEFORE -> AFTER)", "CAP"], rows)
    return f"{head}\n{info}\n\n{quota}"


@guarded
def run_submit(args: argparse.Namespace) -> int:
    """``topogov submit``."""
    from topogov.cli.client import CliError

    body, query, headers = submission(args)
    api = api_for(args)
    answer = api.call("POST", "/v1/jobs", query=query, body=body, headers=headers)
    if args.output == "json":
        print_json(answer)
        return EXIT_OK
    now = None
    if not answer.get("dry_run"):
        try:  # "quota after": the team's in-flight total now that the job is charged
            now = api.call("GET", f"/v1/teams/{_seg(answer['decision']['team'])}").get("in_flight")
        except CliError as exc:
            print(f"{_prog(args)}: (in-flight total not shown: {exc.message})", file=sys.stderr)
    print(decision_text(answer, now))
    return EXIT_OK


# -- jobs, job, cancel ----------------------------------------------------------------------------------
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
    from topogov.cli.client import CliError

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
    view = api.call("GET", f"/v1/jobs/{_seg(team)}/{_seg(args.name)}")
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
    answer = api.call("DELETE", f"/v1/jobs/{_seg(team)}/{_seg(args.name)}")
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


# -- teams ----------------------------------------------------------------------------------------------
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
    quota, borrow = view.get("quota") or {}, view.get("borrow_limit") or {}
    flight, admitted = view.get("in_flight") or {}, view.get("admitted") or {}
    cap = view.get("max_in_flight") or {}
    classes = ", ".join(view.get("priority_classes") or []) or "-"
    head = (
        f"{view['team']}  (namespace {view.get('namespace')}, queue {view.get('local_queue')})\n"
        f"  priority classes: {classes}; default {view.get('default_priority_class')}"
    )
    shown = [
        r for r in RESOURCES
        if r == GPU or any(m.get(r, 0) for m in (quota, borrow, flight, admitted))
    ]  # fmt: skip
    width = max(len(r) for r in shown)
    lines = [head]
    for r in shown:
        q, b, f, a = (int(m.get(r, 0)) for m in (quota, borrow, flight, admitted))
        lines.append(
            f"  {r.ljust(width)}  {bar(q, b, f, a)} in flight {amount(r, f)} / quota {amount(r, q)} "
            f"(+{amount(r, b)} borrow), admitted {amount(r, a)} · cap {amount(r, cap.get(r, 0))}"
        )
    return "\n".join(lines)


@guarded
def run_teams(args: argparse.Namespace) -> int:
    """``topogov teams``."""
    api = api_for(args)
    if args.team:
        answer = api.call("GET", f"/v1/teams/{_seg(args.team)}")
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


# -- topology (the API side) ----------------------------------------------------------------------------
def topology_format(args: argparse.Namespace) -> str:
    """``--format`` with ``--output json`` as another way to say ``--format json``."""
    fmt = args.format
    if getattr(args, "output", "text") == "json":
        if fmt not in (None, "json"):
            raise usage(f"--output json and --format {fmt} disagree: give one")
        return "json"
    return fmt or "mermaid"


def write_out(args: argparse.Namespace, text: str) -> None:
    if args.out:
        try:
            Path(args.out).write_text(text, encoding="utf-8")
        except OSError as exc:
            raise usage(f"cannot write {args.out}: {exc}") from None
        print(f"wrote {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")


@guarded
def run_topology_api(args: argparse.Namespace) -> int:
    """``topogov topology`` with an endpoint: ``GET /v1/topology`` (the snapshot the API decides on)."""
    from topogov.cli.graphviz import DOT_MISSING, dot_path, render_svg

    fmt = topology_format(args)
    if fmt == "svg" and dot_path() is None:
        raise usage(DOT_MISSING)
    api = api_for(args)
    if fmt == "mermaid":
        write_out(args, api.call("GET", "/v1/topology", query={"format": "mermaid"}, text=True))
    elif fmt == "json":
        write_out(args, json.dumps(api.call("GET", "/v1/topology"), indent=2))
    else:
        try:
            write_out(args, render_svg(api.call("GET", "/v1/topology")))
        except RuntimeError as exc:
            raise usage(str(exc)) from None
    return EXIT_OK
