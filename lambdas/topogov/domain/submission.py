"""A submission's vocabulary: what a caller asks (a high-level job or a Job manifest, and its
topology) and what the API decides (team, queue, priority, topology, the quota arithmetic).

Pure models (pydantic, no I/O), strict: nothing is coerced, unknown fields are refused. They are the
API's request and response bodies as they are (the OpenAPI document is generated from them), and what
the admission decision in :mod:`topogov.logic.admission` works on. The high-level request uses the
parameter names of ``hyp create hyp-pytorch-job`` (SageMaker HyperPod CLI) where they apply, so its
users feel at home.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    StrictStr,
    field_validator,
    model_validator,
)

DNS1123 = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
INSTANCE_TYPE = r"^(ml\.)?[a-z0-9-]+\.[a-z0-9]+$"  # EC2's name, or SageMaker's: ml.p5.48xlarge
_DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")

Name = Annotated[str, Field(min_length=1, max_length=63, pattern=DNS1123)]
Level = Annotated[str, Field(min_length=1, max_length=253)]


def parse_duration(text: str) -> int:
    """``15m`` / ``1h30m`` / ``90s`` -> seconds (> 0)."""
    if text.strip().isdigit():
        n = text.strip()
        raise ValueError(f"{n!r} has no unit: add one, e.g. {n}m (a duration like 15m, 1h30m or 90s)")
    m = _DURATION.match(text)
    if not text or m is None or not any(m.groups()):
        raise ValueError("must be a duration like 15m, 1h30m or 90s")
    h, mnt, s = (int(g or 0) for g in m.groups())
    total = h * 3600 + mnt * 60 + s
    if total <= 0:
        raise ValueError("must be longer than 0s")
    return total


MAX_WINDOW_S = 31 * 86400  # a month of history: the replay's job cap (MAX_WHATIF_JOBS) binds first
_WINDOW = re.compile(r"^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?$")


def parse_window(text: str) -> int:
    """``7d`` / ``36h`` / ``1d12h`` / ``90m`` -> seconds; a ValueError saying what is wrong."""
    m = _WINDOW.match(text.strip())
    if not text.strip() or m is None or not any(m.groups()):
        raise ValueError(f"must be a window like 7d, 36h or 90m, got {text!r}")
    d, h, mnt = (int(g or 0) for g in m.groups())
    total = d * 86400 + h * 3600 + mnt * 60
    if not 0 < total <= MAX_WINDOW_S:
        raise ValueError(f"must be longer than 0m and at most {MAX_WINDOW_S // 86400}d, got {text!r}")
    return total


# What a pattern means, for the messages (pydantic would print the regular expression).
PATTERN_MEANS = {
    DNS1123: "must be a DNS-1123 label: lower-case letters, digits and '-', starting and ending with a "
    "letter or digit",
    INSTANCE_TYPE: "must be an EC2 instance type, e.g. p5.48xlarge",
}


TYPE_MEANS = {
    "int_type": "a whole number", "string_type": "a string", "bool_type": "true or false",
    "list_type": "a list", "dict_type": "an object", "float_type": "a number",
}  # fmt: skip


def problems_from(errors: list[Any]) -> list[dict[str, str]]:
    """Pydantic's errors as ``{"field", "message"}`` a person reads: the dotted location (``body``
    for the whole request), no ``Value error, `` prefix, a pattern said in words."""
    out = []
    for e in errors:
        loc = [str(p) for p in e.get("loc", ()) if p != "body"]
        message = str(e.get("msg", "invalid")).removeprefix("Value error, ")
        if e.get("type") == "string_pattern_mismatch":
            pattern = (e.get("ctx") or {}).get("pattern")
            message = PATTERN_MEANS.get(str(pattern), message)
        ctx = e.get("ctx") or {}
        kind = e.get("type")
        if kind == "string_too_long":
            message = f"at most {ctx.get('max_length')} characters"
        elif kind == "greater_than_equal":
            message = f"must be at least {ctx.get('ge')}"
        elif kind == "less_than_equal":
            message = f"must be at most {ctx.get('le')}"
        elif kind == "missing":
            message = "required"
        elif kind == "extra_forbidden":
            message = "unknown field"
        elif kind in TYPE_MEANS:
            message = f'must be {TYPE_MEANS[kind]} (values are not converted: "8" is not 8)'
        out.append({"field": ".".join(loc) or "body", "message": message})
    return out


def _a_duration_string(v: str) -> str:
    parse_duration(v)
    return v


# A duration like 15m or 1h30m, checked as parse_duration reads it (and kept as written).
ExpectedDuration = Annotated[StrictStr, AfterValidator(_a_duration_string)]


class Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


class SliceSpec(Strict):
    """Pod-set slices: every ``size`` consecutive pods (by completion index) in one domain of
    ``level``, a level tighter than or equal to the job's (Kueue's ``podset-slice-*`` annotations)."""

    level: Level
    size: Annotated[StrictInt, Field(ge=1, le=10_000)] | None = Field(
        None,
        description="pods per slice; default: the largest that divides the job's pod count and that a "
        "domain of the slice level holds",
    )


class TopologySpec(Strict):
    mode: Literal["required", "preferred", "auto", "none"]
    level: Level | None = None
    slice: SliceSpec | None = Field(
        None,
        description="every slice.size consecutive pods in one domain of slice.level, the whole job in one "
        "domain of its level (required, preferred or auto's)",
    )
    fallbackAfter: StrictStr | None = Field(
        None, description="required only: relax to preferred after this long"
    )

    @field_validator("fallbackAfter")
    @classmethod
    def _a_duration(cls, v: str | None) -> str | None:
        if v is not None:
            parse_duration(v)
        return v

    @model_validator(mode="after")
    def _consistent(self) -> TopologySpec:
        if self.mode in ("required", "preferred") and not self.level:
            raise ValueError(f"mode {self.mode!r} needs a level")
        if self.mode in ("auto", "none") and self.level:
            raise ValueError(f"mode {self.mode!r} takes no level")
        if self.fallbackAfter is not None and self.mode != "required":
            raise ValueError("fallbackAfter applies to mode 'required' only")
        if self.slice is not None and self.mode == "none":
            raise ValueError("mode 'none' takes no slice: slices are placed inside the job's level")
        return self


class JobRequest(Strict):
    """A high-level job, named as ``hyp create hyp-pytorch-job`` parameters."""

    job_name: Name
    image: Annotated[str, Field(min_length=1, max_length=512)]
    command: list[StrictStr] | None = None
    args: list[StrictStr] | None = None
    environment: dict[StrictStr, StrictStr] | None = None
    instance_type: Annotated[str, Field(pattern=INSTANCE_TYPE, max_length=64)] | None = None
    node_count: Annotated[StrictInt, Field(ge=1, le=10_000)] | None = None
    replica_count: Annotated[StrictInt, Field(ge=1, le=10_000)] | None = None
    tasks_per_node: Annotated[StrictInt, Field(ge=1, le=1024)] | Literal["auto", "cpu", "gpu"] | None = None
    accelerators: Annotated[StrictInt, Field(ge=0, le=64)] = 0
    vcpu: Annotated[float, Field(ge=0, le=4096)] = 0
    memory: Annotated[float, Field(ge=0, le=65536, description="GiB")] = 0
    efa: Annotated[StrictInt, Field(ge=0, le=64)] = 0
    priority: Name | None = None
    max_retry: Annotated[StrictInt, Field(ge=0, le=100)] | None = None
    preferred_topology: Level | None = None
    required_topology: Level | None = None
    topology: TopologySpec | None = None
    queue_name: Name | None = None
    team: Name | None = None
    namespace: Name | None = None
    expected_duration: ExpectedDuration | None = Field(
        None, description="how long the job is expected to run (e.g. 2h): the start estimates use it"
    )
    render_as: Literal["auto", "job", "pytorchjob", "hyperpodpytorchjob"] = Field(
        "auto",
        description="the kind to render: auto (HyperPodPyTorchJob on HyperPod, else PyTorchJob where "
        "Kubeflow's training operator is installed, else an Indexed Job with a headless Service), or one "
        "of them",
    )
    pull_policy: Literal["Always", "IfNotPresent", "Never"] | None = None
    deep_health_check_passed_nodes_only: bool = Field(
        False, description="only nodes that passed HyperPod's deep health check (as hyp's flag)"
    )

    @field_validator("instance_type")
    @classmethod
    def _ec2_name(cls, v: str | None) -> str | None:
        """SageMaker's ``ml.p5.48xlarge`` (what ``hyp`` takes) is EC2's ``p5.48xlarge``: the name the
        snapshot and policy use; on HyperPod the Job's nodeSelector gets the ``ml.`` name back
        (logic/admission.py), as HyperPod labels its nodes."""
        from topogov.domain.nodes import normalized_instance_type

        return None if v is None else normalized_instance_type(v)

    @field_validator("vcpu", "memory", mode="before")
    @classmethod
    def _numbers_not_strings(cls, v: Any) -> Any:
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise ValueError("must be a number (strings are not converted)")
        return float(v)

    @model_validator(mode="after")
    def _one_of_each(self) -> JobRequest:
        if self.node_count is not None and self.replica_count is not None:
            raise ValueError("give node_count or replica_count, not both")
        given = [
            k for k in ("preferred_topology", "required_topology", "topology") if getattr(self, k) is not None
        ]
        if len(given) > 1:
            raise ValueError(
                f"give one of preferred_topology, required_topology, topology (got {', '.join(given)})"
            )
        if not (self.accelerators or self.vcpu or self.memory or self.efa):
            raise ValueError(
                "request at least one of accelerators, vcpu, memory, efa: quota is charged on requests"
            )
        return self

    @property
    def pods(self) -> int:
        return self.replica_count or self.node_count or 1

    def topology_spec(self) -> TopologySpec:
        if self.topology is not None:
            return self.topology
        if self.required_topology:
            return TopologySpec(mode="required", level=self.required_topology)
        if self.preferred_topology:
            return TopologySpec(mode="preferred", level=self.preferred_topology)
        return TopologySpec(mode="none")


class ManifestRequest(Strict):
    """A raw job of an accepted kind (batch/v1 Job, PyTorchJob, JobSet; HyperPodPyTorchJob on HyperPod),
    checked and completed (never otherwise rewritten)."""

    manifest: dict[str, Any]
    team: Name | None = None
    topology: TopologySpec | None = None
    expected_duration: ExpectedDuration | None = Field(
        None, description="how long the job is expected to run (e.g. 2h): the start estimates use it"
    )


def stored_request(request: JobRequest | ManifestRequest, kind: str) -> dict[str, Any]:
    """What the job's ledger record keeps of its request: what the API needs to decide it again (the
    what-if history's replay, the estimates' ``expected_duration``), bounded whatever the body's size.
    A high-level request without its command, arguments and environment; a manifest by its ``kind``
    (``batch/v1 Job``), with the topology and expected duration asked beside it."""
    if isinstance(request, JobRequest):
        return request.model_dump(mode="json", exclude={"command", "args", "environment"})
    return {
        "manifest": {"kind": kind},
        "team": request.team,
        "topology": None if request.topology is None else request.topology.model_dump(mode="json"),
        "expected_duration": request.expected_duration,
    }


class QuotaArithmetic(BaseModel):
    resource: str
    asked: int
    quota: int
    borrow_limit: int
    in_flight_before: int | None = None
    in_flight_cap: int


class TopologyDecision(BaseModel):
    mode: Literal["required", "preferred", "none"]
    level: str | None
    domain_now: str | None = Field(
        None, description="where Kueue's BestFit would place the job now (the Kueue model), if it fits now"
    )
    nodes_now: list[str] | None = Field(None, description="the nodes that placement would use")
    reason: str
    fallback_after_s: int | None = None
    slice_level: str | None = Field(
        None, description="pod-set slices: every slice_size consecutive pods in one domain of this level"
    )
    slice_size: int | None = Field(None, description="pods per slice (with slice_level)")


class PodSetDecision(BaseModel):
    name: str
    pods: int
    gpus_per_pod: int


class Decision(BaseModel):
    team: str
    namespace: str
    local_queue: str
    priority_class: str
    priority_value: int
    pods: int
    topology: TopologyDecision
    quota: list[QuotaArithmetic]
    kind: str = Field("batch/v1 Job", description="the job's apiVersion and kind")
    pod_sets: list[PodSetDecision] = Field(
        default_factory=list, description="its pod sets as Kueue makes them, each charged"
    )
    rendered_as: str | None = Field(
        None, description="a high-level request: the kind rendered, and why (discovery or render_as)"
    )


class SubmitResponse(BaseModel):
    dry_run: bool
    created: bool
    decision: Decision
    job: dict[str, Any] | None = None


MAX_WHATIF_JOBS = 2000  # a replay must answer inside API Gateway's 29 s (bench simulate: ~2 ms a job)


class WhatIfRequest(Strict):
    """``POST /v1/whatif``: a trace replayed under the policy in force and a proposed one or a
    changed fleet, on the current snapshot's fleet (``topogov whatif``, run by the API)."""

    trace: Annotated[str, Field(min_length=1, max_length=1_000_000)] | None = Field(
        None,
        description="the trace CSV (submit_s,team,name,pods,gpus_per_pod,...), as topogov whatif reads it",
    )
    history: Annotated[StrictStr, Field(min_length=1, max_length=16)] | None = Field(
        None,
        description="instead of a trace: the jobs submitted in this window (e.g. 7d, 36h), each with "
        "the run time the reconcile pass observed",
    )
    policy: Annotated[str, Field(min_length=1, max_length=200_000)] | None = Field(
        None, description="a proposed teams.yaml (YAML text); default: the policy in force"
    )
    fleet_change: list[Annotated[str, Field(pattern=r"^[+-][a-z0-9.-]+=[0-9]+$", max_length=64)]] = Field(
        default_factory=list,
        max_length=8,
        description="+TYPE=N adds N nodes as a new layer-3 domain; -TYPE=N",
    )
    regime: Literal["as-submitted", "plain-kueue", "preferred", "required", "topogov"] = "as-submitted"
    release_lag_s: Annotated[float, Field(ge=0, le=3600)] = 0.0

    @field_validator("history")
    @classmethod
    def _a_window(cls, v: str | None) -> str | None:
        if v is not None:
            parse_window(v)
        return v

    @model_validator(mode="after")
    def _trace_or_history(self) -> WhatIfRequest:
        if (self.trace is None) == (self.history is None):
            raise ValueError("give either trace (a CSV) or history (a window such as 7d), not both")
        return self
