"""The simulator's inputs: a job trace, a fleet, and changes to a fleet (pure; text in, values out).

**Trace** (CSV, a header then one job a row)::

    submit_s,team,name,pods,gpus_per_pod,instance_type,duration_s,topology_mode,topology_level,fallback_after_s,priority

``submit_s`` and ``duration_s`` are seconds (``duration_s``: the job's run time inside one network
node, what it takes where it runs fastest); ``topology_mode`` is ``none``, ``auto``, ``preferred``
or ``required`` with ``topology_level`` (``layer-3``, ``hostname``...) for the last two;
``fallback_after_s`` applies to ``required``. Empty fields take the API's defaults: no instance type,
no topology, the team's default priority class. Columns may come in any order; unknown ones are an
error (a typo would otherwise be a default).

**Fleet** (CSV)::

    node,instance_type,layer-1,layer-2,layer-3,layer-4

one node a row, its network nodes from layer 1 (the farthest) down; ``layer-4`` may be empty (EC2
gives three layers for most instance types). Allocatable comes from the instance type
(:data:`topogov.domain.instance_types.ALLOCATABLE`).

**Fleet changes**: ``+p5.48xlarge=32`` adds 32 nodes of that type as one new layer-3 domain (the
bottom network node; under a layer-1 and layer-2 node of their own, and for a type whose nodes have
four layers, one layer-4 node too); ``-p5.48xlarge=8`` removes the last 8 nodes of that type (by
name).

Every problem is a :class:`InputError` naming the line and the field.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pydantic import ValidationError

from topogov.domain.instance_types import ALLOCATABLE
from topogov.domain.placement import UnknownLevel, resolve_level
from topogov.domain.quantity import Resources, resources_from
from topogov.domain.submission import JobRequest
from topogov.domain.tree import NodeCapacity

TRACE_COLUMNS = (
    "submit_s", "team", "name", "pods", "gpus_per_pod", "instance_type", "duration_s",
    "topology_mode", "topology_level", "fallback_after_s", "priority", "kind",
)  # fmt: skip
# a trace row's kind, as the API renders a high-level request (``render_as``): a batch/v1 Job, or a
# PyTorchJob (a master and its workers, one pod-set group)
TRACE_KINDS = ("job", "pytorchjob")
KIND_COLUMN = TRACE_COLUMNS[-1]
REQUIRED_TRACE_COLUMNS = ("submit_s", "team", "name", "pods", "gpus_per_pod", "duration_s")
FLEET_COLUMNS = ("node", "instance_type", "layer-1", "layer-2", "layer-3", "layer-4")
MODES = ("none", "auto", "preferred", "required")
MAX_ROWS = 1_000_000


class InputError(ValueError):
    """A problem in an input file: where (``source``, ``line``, ``field``) and what."""

    def __init__(self, source: str, line: int | None, field: str | None, message: str) -> None:
        where = source + (f", line {line}" if line else "") + (f", {field}" if field else "")
        super().__init__(f"{where}: {message}")
        self.source, self.line, self.field, self.message = source, line, field, message


@dataclass(frozen=True, slots=True)
class TraceJob:
    submit_s: float
    team: str
    name: str
    pods: int
    gpus_per_pod: int
    duration_s: float
    instance_type: str | None = None
    topology_mode: str = "none"
    topology_level: str | None = None
    fallback_after_s: float | None = None
    priority: str | None = None
    kind: str = "job"  # TRACE_KINDS


def _rows(
    text: str, source: str, known: Sequence[str], required: Sequence[str]
) -> Iterable[tuple[int, dict[str, str]]]:
    reader = csv.DictReader(io.StringIO(text))
    header = [h.strip() for h in (reader.fieldnames or [])]
    if not header:
        raise InputError(source, 1, None, f"no header; expected the columns {', '.join(known)}")
    unknown = [h for h in header if h not in known]
    if unknown:
        raise InputError(source, 1, unknown[0], f"unknown column (known: {', '.join(known)})")
    missing = [c for c in required if c not in header]
    if missing:
        raise InputError(source, 1, missing[0], "missing column")
    reader.fieldnames = header
    for i, row in enumerate(reader, start=2):
        if i > MAX_ROWS + 1:
            raise InputError(source, i, None, f"more than {MAX_ROWS} rows")
        if None in row:
            raise InputError(source, i, None, "more fields than the header has columns")
        yield i, {k: (v or "").strip() for k, v in row.items()}


def _number(source: str, line: int, field: str, raw: str, *, integer: bool = False, low: float = 0) -> float:
    try:
        value = int(raw) if integer else float(raw)
    except ValueError:
        kind = "a whole number" if integer else "a number"
        raise InputError(source, line, field, f"must be {kind}, got {raw!r}") from None
    if not math.isfinite(value) or value < low:
        raise InputError(source, line, field, f"must be at least {low:g}, got {raw!r}")
    return value


def parse_trace(text: str, source: str = "trace") -> list[TraceJob]:
    """The jobs of a trace CSV, in submission order (ties: file order). Each row is also checked as
    the API would check the submission (:class:`~topogov.domain.submission.JobRequest`)."""
    jobs: list[TraceJob] = []
    names: dict[tuple[str, str], int] = {}
    for line, row in _rows(text, source, TRACE_COLUMNS, REQUIRED_TRACE_COLUMNS):
        job = _trace_job(source, line, row)
        key = (job.team, job.name)
        if key in names:
            raise InputError(source, line, "name", f"{job.team}/{job.name} is already on line {names[key]}")
        names[key] = line
        jobs.append(job)
    if not jobs:
        raise InputError(source, None, None, "no jobs")
    return sorted(jobs, key=lambda j: j.submit_s)  # stable: ties keep file order


def _trace_job(source: str, line: int, row: dict[str, str]) -> TraceJob:
    for field in REQUIRED_TRACE_COLUMNS:
        if not row.get(field):
            raise InputError(source, line, field, "is empty")
    mode = row.get("topology_mode") or "none"
    if mode not in MODES:
        raise InputError(source, line, "topology_mode", f"must be one of {', '.join(MODES)}, got {mode!r}")
    level = row.get("topology_level") or None
    if mode in ("preferred", "required") and not level:
        raise InputError(source, line, "topology_level", f"mode {mode} needs a level, e.g. layer-3")
    if mode in ("none", "auto") and level:
        raise InputError(source, line, "topology_level", f"mode {mode} takes no level")
    if level:
        try:
            resolve_level(level)
        except UnknownLevel as exc:
            raise InputError(source, line, "topology_level", str(exc)) from None
    fallback_raw = row.get("fallback_after_s") or ""
    fallback = _number(source, line, "fallback_after_s", fallback_raw, low=1) if fallback_raw else None
    if fallback is not None and mode != "required":
        raise InputError(source, line, "fallback_after_s", "applies to topology_mode required only")
    kind = row.get(KIND_COLUMN) or "job"
    if kind not in TRACE_KINDS:
        raise InputError(source, line, "kind", f"must be one of {', '.join(TRACE_KINDS)}, got {kind!r}")
    job = TraceJob(
        submit_s=_number(source, line, "submit_s", row["submit_s"]),
        team=row["team"],
        name=row["name"],
        pods=int(_number(source, line, "pods", row["pods"], integer=True, low=1)),
        gpus_per_pod=int(_number(source, line, "gpus_per_pod", row["gpus_per_pod"], integer=True)),
        duration_s=_number(source, line, "duration_s", row["duration_s"], low=1),
        instance_type=row.get("instance_type") or None,
        topology_mode=mode,
        topology_level=level,
        fallback_after_s=fallback,
        priority=row.get("priority") or None,
        kind=kind,
    )
    try:
        as_request(job, spec_mode=mode)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        raise InputError(source, line, _TRACE_FIELD.get(loc, loc or None), err["msg"]) from None
    return job


_TRACE_FIELD = {"job_name": "name", "replica_count": "pods", "accelerators": "gpus_per_pod"}


def as_request(
    job: TraceJob, *, spec_mode: str, level: str | None = None, fallback_after_s: float | None = None
) -> JobRequest:
    """The submission a trace job makes, as ``POST /v1/jobs`` would receive it (topology as given)."""
    topology: dict[str, str] = {"mode": spec_mode}
    if spec_mode in ("preferred", "required"):
        topology["level"] = level or job.topology_level or ""
    if spec_mode == "required" and fallback_after_s:
        topology["fallbackAfter"] = f"{max(1, math.ceil(fallback_after_s))}s"
    return JobRequest.model_validate(
        {
            "job_name": job.name,
            "image": "trace",
            "replica_count": job.pods,
            "accelerators": job.gpus_per_pod,
            **({"vcpu": 1.0} if job.gpus_per_pod == 0 else {}),
            "instance_type": job.instance_type,
            "priority": job.priority,
            "team": job.team,
            "topology": topology,
            "render_as": job.kind,
        }
    )


def parse_fleet(text: str, source: str = "fleet") -> list[NodeCapacity]:
    """The nodes of a fleet CSV, with allocatable from their instance type."""
    nodes: list[NodeCapacity] = []
    seen: dict[str, int] = {}
    for line, row in _rows(text, source, FLEET_COLUMNS, FLEET_COLUMNS[:5]):
        name, itype = row.get("node", ""), row.get("instance_type", "")
        if not name:
            raise InputError(source, line, "node", "is empty")
        if name in seen:
            raise InputError(source, line, "node", f"{name} is already on line {seen[name]}")
        if itype not in ALLOCATABLE:
            raise InputError(
                source,
                line,
                "instance_type",
                f"unknown instance type {itype!r} (known: {', '.join(sorted(ALLOCATABLE))})",
            )
        path = [row.get(f"layer-{i}", "") for i in range(1, 5)]
        depth = 4 if path[3] else 3
        for i in range(depth):
            if not path[i]:
                raise InputError(
                    source, line, f"layer-{i + 1}", "is empty (every node has at least three layers)"
                )
        seen[name] = line
        nodes.append(NodeCapacity(name, tuple(path[:depth]), itype, allocatable=allocatable(itype)))
    if not nodes:
        raise InputError(source, None, None, "no nodes")
    return nodes


def allocatable(instance_type: str) -> Resources:
    return resources_from(ALLOCATABLE[instance_type])


def fleet_csv(nodes: Iterable[NodeCapacity]) -> str:
    """A fleet as the CSV :func:`parse_fleet` reads (for a snapshot's nodes, or a generated fleet)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(FLEET_COLUMNS)
    for n in nodes:
        writer.writerow([n.name, n.instance_type, *n.path, *[""] * (4 - len(n.path))])
    return out.getvalue()


def synthetic_fleet(
    instance_type: str, fanout: Sequence[int], per_leaf: int, prefix: str = ""
) -> list[NodeCapacity]:
    """A full tree: ``fanout`` network nodes per layer (layer 1 first), ``per_leaf`` nodes under each
    bottom one; names ``<prefix>n00000``... and network nodes ``<prefix>nn-<layer>-<index>``."""
    if instance_type not in ALLOCATABLE:
        raise ValueError(f"unknown instance type {instance_type!r}")
    leaves = math.prod(fanout)
    nodes = []
    for i in range(leaves * per_leaf):
        leaf, path, span = i // per_leaf, [], leaves
        for layer, fan in enumerate(fanout, start=1):
            span //= fan
            path.append(f"{prefix}nn-{layer}-{leaf // span if span else leaf}")
        nodes.append(
            NodeCapacity(
                f"{prefix}n{i:05d}", tuple(path), instance_type, allocatable=allocatable(instance_type)
            )
        )
    return nodes


def change_fleet(nodes: Sequence[NodeCapacity], change: str) -> list[NodeCapacity]:
    """``+TYPE=N`` (add N nodes as a new branch) or ``-TYPE=N`` (remove the last N of that type)."""
    text = change.strip()
    sign, _, rest = text[:1], None, text[1:]
    itype, eq, count_raw = rest.partition("=")
    if sign not in "+-" or not sign or not eq or not count_raw.isdigit() or int(count_raw) < 1:
        raise InputError(
            "--fleet-change", None, None, f"{change!r}: expected +TYPE=N or -TYPE=N, e.g. +p5.48xlarge=32"
        )
    count = int(count_raw)
    if itype not in ALLOCATABLE:
        raise InputError("--fleet-change", None, None, f"unknown instance type {itype!r}")
    if sign == "-":
        mine = sorted((n for n in nodes if n.instance_type == itype), key=lambda n: n.name)
        if count > len(mine):
            raise InputError(
                "--fleet-change", None, None, f"{change!r}: the fleet has {len(mine)} {itype} nodes"
            )
        gone = {n.name for n in mine[len(mine) - count :]}
        return [n for n in nodes if n.name not in gone]
    taken = {n.name for n in nodes}
    branch = 0
    while any(n.path and n.path[0] == f"nn-new{branch}-1" for n in nodes):
        branch += 1
    depth = max((len(n.path) for n in nodes if n.instance_type == itype), default=3)
    path = tuple(f"nn-new{branch}-{layer}" for layer in range(1, depth + 1))
    added = []
    for i in range(count):
        name = f"new{branch}-{itype.split('.')[0]}-{i:04d}"
        while name in taken:
            name += "x"
        added.append(NodeCapacity(name, path, itype, allocatable=allocatable(itype)))
    return [*nodes, *added]
