"""``topogov submit``: a job from the flags of ``hyp create hyp-pytorch-job`` or a manifest (a Job, a
PyTorchJob, a JobSet; a HyperPodPyTorchJob on HyperPod), sent as one signed ``POST /v1/jobs``; prints
the API's decision and the quota arithmetic."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from topogov_cli.common import (
    EXIT_OK,
    add_api_options,
    amount,
    api_for,
    command,
    duration,
    fields,
    guarded,
    level_name,
    print_json,
    prog,
    seg,
    table,
    topology_text,
    usage,
)
from topogov_cli.jobs import pods_text

HIGH_LEVEL = (
    "job_name", "image", "command", "args", "environment", "instance_type", "node_count", "replica_count",
    "tasks_per_node", "accelerators", "vcpu", "memory", "efa", "priority", "max_retry", "queue_name",
    "namespace", "render_as", "pull_policy",
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


SUBMIT_EXAMPLES = """examples:
  topogov submit --job-name llm --image pytorch:2.5 --accelerators 8 --efa 32 --replica-count 4 \\
                 --required-topology layer-3 --fallback-after 15m
  topogov submit --job-name llm --image pytorch:2.5 --accelerators 8 --node-count 4 --topology auto --dry-run
  topogov submit --job-name llm --image pytorch:2.5 --accelerators 8 --replica-count 16 --render-as job \
                 --required-topology layer-2 --slice-level layer-3 --slice-size 4
  topogov submit -f job.yaml                 # a batch/v1 Job, kept as written (queue, priority, annotations)
  topogov submit --job-name x --image y --vcpu 4 --command "python train.py" --args="--epochs 10" \\
                 --environment NCCL_DEBUG=INFO --environment WANDB_MODE=offline

--command/--args take a JSON list ('["python", "train.py"]', as hyp does) or words split like a shell
("python train.py"); write --args="--epochs 10" when the value starts with '-'.
--environment takes KEY=VALUE (repeatable) or a JSON object. --memory is in GiB.
Levels: layer-1 .. layer-4, hostname, or the full label key."""


def add_parser(sub: Any) -> None:
    """Add ``submit`` to the top-level ``subparsers``."""
    s = command(
        sub,
        "submit",
        "submit a job: flags of `hyp create hyp-pytorch-job`, or -f a manifest",
        "Submit a job to the team's queue. The API decides the team, the priority and the topology "
        "annotation, checks the team's quota and in-flight cap, and says why; this prints that "
        "decision (team, queue, priority, pods, topology and why, the quota arithmetic).",
        SUBMIT_EXAMPLES,
    )
    _job_options(s.add_argument_group("the job (names of `hyp create hyp-pytorch-job`)"))
    _topology_options(s.add_argument_group("topology"))
    _submission_options(s.add_argument_group("submission"))
    add_api_options(s)
    s.set_defaults(func=run_submit)


def _job_options(job: Any) -> None:
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
    job.add_argument("--pull-policy", choices=("Always", "IfNotPresent", "Never"), help="imagePullPolicy")
    job.add_argument(
        "--deep-health-check-passed-nodes-only",
        action="store_true",
        default=None,
        help="on HyperPod: only nodes whose deep health check passed",
    )
    job.add_argument(
        "--render-as",
        choices=("auto", "job", "pytorchjob", "hyperpodpytorchjob"),
        help="the kind to create (default auto: HyperPodPyTorchJob on HyperPod, else PyTorchJob where "
        "Kubeflow's training operator is installed, else an Indexed Job with a headless Service)",
    )


def _topology_options(topo: Any) -> None:
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
    topo.add_argument(
        "--slice-level",
        metavar="LEVEL",
        help="pod-set slices: every --slice-size consecutive pods in one domain of LEVEL (tighter than or "
        "the job's level; with --required-topology, --preferred-topology or --topology auto)",
    )
    topo.add_argument(
        "--slice-size",
        metavar="N",
        type=int,
        help="with --slice-level: pods per slice (default: the largest that divides the pods and fits)",
    )


def _submission_options(how: Any) -> None:
    how.add_argument(
        "-f",
        "--file",
        metavar="JOB.yaml",
        help="a manifest, YAML or JSON ('-' for stdin): batch/v1 Job, kubeflow.org/v1 PyTorchJob, "
        "jobset.x-k8s.io/v1alpha2 JobSet, or on HyperPod sagemaker.amazonaws.com/v1 HyperPodPyTorchJob",
    )
    how.add_argument("--team", metavar="TEAM", help="the team (default: your only team)")
    how.add_argument(
        "--expected-duration", metavar="DURATION", help="how long it should run (2h): start estimates use it"
    )
    how.add_argument("--dry-run", action="store_true", help="decide and explain; create and charge nothing")
    how.add_argument(
        "--idempotency-key", metavar="KEY", help="a retry with the same key returns the first answer"
    )


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
        raise usage(f"{path} must hold exactly one manifest (a mapping)")
    # YAML timestamps (creationTimestamp: ...) become strings, as the API takes them.
    return json.loads(json.dumps(docs[0], default=str))


def _topology(args: argparse.Namespace) -> dict[str, Any] | None:
    """The ``topology`` object the flags ask for, when they need one (else the plain fields)."""
    if args.slice_size is not None and not args.slice_level:
        raise usage("--slice-size needs --slice-level LEVEL")
    topology: dict[str, Any] | None = None
    if args.topology:
        topology = {"mode": args.topology}
    elif args.fallback_after:
        topology = {"mode": "required", "level": args.required_topology, "fallbackAfter": args.fallback_after}
    if args.slice_level:
        if topology is None and args.required_topology:
            topology = {"mode": "required", "level": args.required_topology}
        if topology is None and args.preferred_topology:
            topology = {"mode": "preferred", "level": args.preferred_topology}
        if topology is None or topology["mode"] == "none":
            raise usage(
                "--slice-level needs --required-topology, --preferred-topology or --topology auto: the "
                "slices are placed inside one domain of the job's level"
            )
        topology["slice"] = {"level": args.slice_level}
        if args.slice_size is not None:
            topology["slice"]["size"] = args.slice_size
    return topology


def submission(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, str], dict[str, str]]:
    """The request ``topogov submit`` sends: (JSON body, query, headers). Argument combinations that
    can never be right are usage errors here; everything else is the API's to judge."""
    if args.fallback_after and not args.required_topology:
        raise usage("--fallback-after needs --required-topology LEVEL")
    topology = _topology(args)
    if args.file:
        given = [_flag(k) for k in HIGH_LEVEL if getattr(args, k) is not None]
        if args.deep_health_check_passed_nodes_only:
            given.append("--deep-health-check-passed-nodes-only")
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
        if args.deep_health_check_passed_nodes_only:
            body["deep_health_check_passed_nodes_only"] = True
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
    if args.expected_duration:
        body["expected_duration"] = args.expected_duration
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
        kind = str(d.get("kind") or "batch/v1 Job").rsplit(" ", 1)[-1]
        head = (
            f"submitted {name} for team {d['team']}: {kind} {d['namespace']}/{name} created,\n"
            "suspended until Kueue admits it"
        )
    topo = d.get("topology") or {}
    fallback = None
    if topo.get("fallback_after_s"):
        fallback = (
            f"relaxed to preferred {level_name(topo.get('level'))} if not admitted within "
            f"{duration(topo['fallback_after_s'])}"
        )
    nodes = topo.get("nodes_now") or []
    placed_now = None
    if topo.get("mode") not in (None, "none"):
        placed_now = (
            f"{topo.get('domain_now')}: "
            + ", ".join(nodes[:3])
            + (f" and {len(nodes) - 3} more" if len(nodes) > 3 else "")
            if nodes
            else "nowhere yet: no domain has room now (none is reserved; Kueue admits it when one has)"
        )
    info = fields(
        [
            ("team", d["team"]),
            ("queue", f"{d['namespace']}/{d['local_queue']}"),
            ("priority", f"{d['priority_class']} ({d['priority_value']})"),
            ("kind", d.get("kind")),
            ("rendered as", d.get("rendered_as")),
            ("pods", pods_text(d)),
            ("topology", topology_text(topo)),
            ("why", topo.get("reason")),
            ("Kueue now", placed_now),
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
    from topogov_cli.client import CliError

    body, query, headers = submission(args)
    api = api_for(args)
    answer = api.call("POST", "/v1/jobs", query=query, body=body, headers=headers)
    if args.output == "json":
        print_json(answer)
        return EXIT_OK
    now = None
    if not answer.get("dry_run"):
        try:  # "quota after": the team's in-flight total now that the job is charged
            now = api.call("GET", f"/v1/teams/{seg(answer['decision']['team'])}").get("in_flight")
        except CliError as exc:
            print(f"{prog(args)}: (in-flight total not shown: {exc.message})", file=sys.stderr)
    print(decision_text(answer, now))
    return EXIT_OK
