"""The API's use cases: submit, look up, list, cancel, team usage, topology. Ports come in as
arguments (policy, snapshot, ledger, jobs); nothing here imports boto3 or the kubernetes client.

Over 800 lines: one class serves every route family. The split is by use case, one module per
family (jobs, estimates, teams and topology) over a shared core (the caches of the snapshot, the
mode and the quotas in force); issue 41 asks for it, not done yet."""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from topogov.domain.errors import (
    Conflict,
    Forbidden,
    NotFound,
    QuotasUnavailable,
    Refusal,
    SnapshotError,
    TopologyUnavailable,
    Unavailable,
    ValidationFailed,
)
from topogov.domain.hyperpod.mode import Mode, mode_in_force
from topogov.domain.kinds import job_key, pod_owner
from topogov.domain.kueue_version import KueueVersion
from topogov.domain.labels import (
    MANAGED_BY,
    MANAGED_BY_LABEL,
    WORKLOAD_JOB_UID_LABEL,
)
from topogov.domain.placement import CapacityIndex
from topogov.domain.podrequests import NamespaceDefaults, namespace_defaults
from topogov.domain.policy import Caller, Policy, Team
from topogov.domain.quantity import RESOURCE_ATTRS, Resources
from topogov.domain.snapshot import Snapshot
from topogov.domain.submission import (
    JobRequest,
    ManifestRequest,
    SubmitResponse,
    WhatIfRequest,
    stored_request,
)
from topogov.domain.tree import build_tree, to_mermaid
from topogov.domain.views.batch import JobView, PodView
from topogov.domain.views.objects import ClusterQueueView
from topogov.domain.views.workload import WorkloadView
from topogov.logic.admission import Admission, decide
from topogov.logic.identity import Identities, RolePaths
from topogov.logic.ports import LedgerPort

NO_SNAPSHOT = (
    "no topology snapshot yet: the reconcile function writes it on its first pass (on its schedule, "
    "or when an instance starts); until then only jobs without a topology request can be decided"
)


class SnapshotSource(Protocol):
    def load(self) -> Snapshot | None: ...


class JobsPort(Protocol):
    """The team namespaces' Jobs, Workloads and Pods, read as views (``domain/views``)."""

    def create(self, namespace: str, manifest: dict[str, Any]) -> JobView: ...
    def get(self, namespace: str, name: str, kind: str = "Job") -> JobView | None: ...
    def delete(self, namespace: str, name: str, kind: str = "Job") -> bool: ...
    def workload_for(self, namespace: str, job_uid: str) -> WorkloadView | None: ...
    def workloads(self, namespace: str) -> list[WorkloadView]: ...
    def list_jobs(self, namespace: str) -> list[JobView]: ...
    def pods_of(self, namespace: str, job: JobView) -> list[PodView]: ...
    def served_kinds(self) -> frozenset[str]: ...
    def create_owned(self, namespace: str, manifest: dict[str, Any], owner: JobView) -> None: ...
    def kueue_pods(self, namespace: str) -> list[PodView]: ...
    def admitted_usage(self, namespace: str) -> Resources: ...


class QueuesPort(Protocol):
    """The ClusterQueues the quotas in force are read from, on HyperPod (``domain/hyperpod/quotas.py``)."""

    def cluster_queue(self, name: str) -> ClusterQueueView | None: ...


class KueuePort(Protocol):
    """The Kueue release the cluster runs (``adapters/kueue_api.py``): estimates and what-ifs say
    which release the model answers for."""

    def kueue_release(self) -> KueueVersion: ...


class KubePort(JobsPort, QueuesPort, KueuePort, Protocol):
    """The API's Kubernetes side whole: the team namespaces' objects and, on HyperPod, the queues."""


def _released_status(record: dict[str, Any], status: str, why: str | None) -> tuple[str, str | None]:
    """A cancelled job whose Job is gone is Cancelled, not Vanished."""
    cancelled = record.get("state") == "released" and record.get("release_reason") == "cancelled"
    if cancelled and status == "Vanished":
        return "Cancelled", None
    return status, why


def _read_only(workload: WorkloadView) -> bool:
    from topogov.domain.jobs import READ_ONLY_KINDS

    return workload.owner_kind in READ_ONLY_KINDS


def _job_row(
    team: str,
    namespace: str,
    r: dict[str, Any],
    live: dict[tuple[str, str], JobView],
    by_uid: dict[str | None, WorkloadView],
    pods_by_uid: dict[str, list[PodView]],
    nodes: dict[str, Any],
) -> tuple[str, dict[str, Any]]:
    """A job Topogov submitted, as ``GET /v1/jobs`` lists it: its record, its Job and its Workload
    (with its status, first)."""
    from topogov.domain.jobs import job_status
    from topogov.domain.landing import landing, pods_from

    kind = r.get("job_kind") or "Job"
    job = live.get((kind, r["name"])) if r.get("namespace", namespace) == namespace else None
    workload = by_uid.get(job.uid) if job else None
    status, why = _released_status(r, *job_status(job, workload))
    asked = ((r.get("decision") or {}).get("topology") or {}).get("level")
    key = job_key(kind, job.name, job.uid) if job else "-"
    landed = landing(pods_from(pods_by_uid.get(key, [])), nodes, asked)
    return status, {
        "team": team,
        "name": r["name"],
        "kind": kind,
        "status": status,
        "why_pending": why,
        "state": r.get("state"),
        "submitted_by": r.get("submitted_by"),
        "submitted_at": r.get("submitted_at"),
        "priority_class": (r.get("decision") or {}).get("priority_class"),
        "topology": (r.get("decision") or {}).get("topology"),
        "fallback_at": (r.get("fallback") or {}).get("at"),
        "placement": landed["verdict"],
        "inside_asked": landed["inside_asked"],
    }


def _read_only_row(
    team: str, w: WorkloadView, pods_by_uid: dict[str, list[PodView]], nodes: dict[str, Any]
) -> dict[str, Any]:
    """A job submitted outside Topogov (``hyp create hyp-pytorch-job``), known by its Kueue Workload and
    its pods (labelled ``HPJob``): shown, never changed or charged."""
    from topogov.domain.jobs import READ_ONLY_KINDS, workload_status
    from topogov.domain.landing import landing, pods_from

    status, why = workload_status(w)
    request = next((ps.topology_request for ps in w.pod_sets if ps.topology_request.asked), None)
    mode = (
        "required"
        if request and request.required
        else "preferred"
        if request and request.preferred
        else "none"
    )
    level = (request.required or request.preferred) if request else None
    landed = landing(
        pods_from(pods_by_uid.get(job_key(w.owner_kind, w.owner_name, w.owner_uid), [])), nodes, level
    )
    return {
        "team": team,
        "name": w.owner_name,
        "status": status,
        "why_pending": why,
        "state": None,
        "submitted_by": None,
        "submitted_at": w.creation_timestamp,
        "priority_class": None,
        "topology": {"mode": mode, "level": level},
        "fallback_at": None,
        "placement": landed["verdict"],
        "inside_asked": landed["inside_asked"],
        "read_only": True,
        "kind": w.owner_kind,
        "submitted_with": READ_ONLY_KINDS[w.owner_kind][0],
    }


DEFAULT_PAGE, MAX_PAGE = 100, 500  # job rows a page of GET /v1/jobs holds (each well under 2 KB)


def _token(team: str, after: str | None) -> str:
    """The next page's token: the team to go on with and the job name to continue after."""
    raw = json.dumps({"team": team, "after": after}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _page_token(token: str | None, teams: list[str]) -> tuple[int, str | None]:
    """(index of the team to start with, the name to continue after) of a ``nextToken``."""
    if token is None:
        return 0, None
    try:
        raw = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        team, after = raw["team"], raw["after"]
        if not isinstance(team, str) or (after is not None and not isinstance(after, str)):
            raise ValueError("not a token")
        return teams.index(team), after
    except (ValueError, KeyError, TypeError) as exc:
        raise ValidationFailed("nextToken", "is not a token this list gave (ask again without it)") from exc


def _ago(seconds: int) -> str:
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h"


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class ApiService:
    policy: Policy
    snapshots: SnapshotSource
    ledger: LedgerPort
    jobs: JobsPort
    clock: Callable[[], str] = _now
    idempotency_store: Any = None  # a Powertools persistence layer (DynamoDB), or None
    snapshot_ttl_s: float = 15.0  # a warm container re-checks S3 for a new snapshot at most this often
    monotonic: Callable[[], float] = time.monotonic
    _index: tuple[int, CapacityIndex, float] | None = None
    _capacity: tuple[Snapshot, dict[str, Any]] | None = None  # the capacity view of one snapshot
    _fleet_map: tuple[Snapshot, list[list[Any]], list[dict[str, Any]]] | None = None  # its node rows
    # the Kueue model of one snapshot and policy in force (HyperPod: the add-on's quotas), its cluster kept
    _model: tuple[Snapshot, Policy, Any] | None = None
    _workloads: Any = None  # the Workloads last read for an estimate (logic/estimates.WorkloadCache)
    _state: tuple[float, Any, Any] | None = None  # (when, for which Forecaster) the estimates' inputs read
    _snapshot_at: float = 0.0  # the indexed snapshot's generated_at (when its content last changed)
    _idempotent: Any = None
    _idempotency_config: Any = None
    lambda_context: Any = None  # set per invocation: the idempotency record expires with the function
    queues: QueuesPort | None = None  # HyperPod: the add-on's ClusterQueues (the quotas in force)
    kueue: KueuePort | None = None  # the Kueue release, stated with estimates and what-ifs
    hyperpod_cluster_arn: str | None = None  # the deployment's (TOPOGOV_HYPERPOD_CLUSTER_ARN)
    # called once the model's cluster of a snapshot is built and kept (bootstrap.freeze_long_lived)
    keep_long_lived: Callable[[], None] | None = None
    _mode: tuple[float, Mode] | None = None
    _in_force: tuple[float, Policy] | None = None
    roles: RolePaths | None = None  # the paths of callers' roles (iam:GetRole), for principal patterns
    _identities: Identities | None = None

    # -- who calls ----------------------------------------------------------------------------------
    def identify(self, arn: str) -> Caller:
        """The caller whose request identity is ``arn``, with the principal ARN the policy's patterns
        are matched against (an assumed-role session's is its role's, path included: logic/identity.py)."""
        if self._identities is None:
            self._identities = Identities(self.policy, self.roles)
        return self._identities.caller(arn)

    def pod_defaults(self, team: Team) -> NamespaceDefaults:
        """What Kueue adds to the requests of the team's pods (its namespace's LimitRange defaults, the
        RuntimeClasses' overhead), as the last reconcile pass read them into the snapshot; none before
        the first pass."""
        try:
            snap = self._snapshot()
        except TopologyUnavailable:
            return NamespaceDefaults()
        return namespace_defaults(snap.pod_defaults, team.namespace)

    # -- the cluster's mode and the quotas in force -------------------------------------------------
    def mode(self) -> Mode:
        """The cluster's mode as the last reconcile pass found it (``domain/hyperpod/mode.py``), else the
        deployment's; re-read with the snapshot at most every ``snapshot_ttl_s``."""
        now = self.monotonic()
        if self._mode is not None and now - self._mode[0] < self.snapshot_ttl_s:
            return self._mode[1]
        try:
            snap = self.snapshots.load()
        except SnapshotError:
            snap = None
        mode = mode_in_force(snap.mode if snap is not None else None, self.hyperpod_cluster_arn)
        self._mode = (now, mode)
        return mode

    def policy_now(self) -> Policy:
        """The policy the API's arithmetic uses: ``teams.yaml``, or on HyperPod ``teams.yaml`` with the
        quotas in force in the task governance add-on's ClusterQueues (one source of truth), re-read at
        most every ``snapshot_ttl_s``. Raises ``QuotasUnavailable`` (503) when they cannot be read:
        nothing is decided on ``teams.yaml``'s numbers instead, which the add-on may not enforce."""
        if not self.mode().hyperpod:
            return self.policy
        now = self.monotonic()
        if self._in_force is not None and now - self._in_force[0] < self.snapshot_ttl_s:
            return self._in_force[1]
        from topogov.domain.hyperpod.quotas import in_force, policy_in_force, read_queues

        if self.queues is None:
            raise QuotasUnavailable("the quotas in force cannot be read: no reader of the ClusterQueues")
        try:
            queues = read_queues(self.policy, self.queues.cluster_queue)
        except QuotasUnavailable:
            raise
        except Refusal as exc:
            raise QuotasUnavailable(
                "the quotas in force (the task governance add-on's ClusterQueues) cannot be read: "
                + exc.message
            ) from exc
        policy = policy_in_force(self.policy, in_force(queues))
        self._in_force = (now, policy)
        return policy

    # -- topology ---------------------------------------------------------------------------------
    def _snapshot(self) -> Snapshot:
        """The current snapshot; 503 TOPOLOGY_UNAVAILABLE while there is none or it cannot be read."""
        try:
            snap = self.snapshots.load()
        except SnapshotError as exc:
            raise TopologyUnavailable(f"the topology snapshot cannot be read: {exc}") from exc
        if snap is None:
            raise TopologyUnavailable(NO_SNAPSHOT)
        return snap

    def index(self) -> CapacityIndex:
        """The capacity index of the current snapshot. The snapshot changes once per reconcile pass
        at most, so a request reuses the index for ``snapshot_ttl_s`` before a conditional GET."""
        now = self.monotonic()
        if self._index is not None and now - self._index[2] < self.snapshot_ttl_s:
            return self._index[1]
        snap = self._snapshot()
        self._snapshot_at = snap.generated_at
        if self._index is None or self._index[0] != id(snap):
            self._index = (id(snap), CapacityIndex(snap.nodes.values()), now)
        else:
            self._index = (self._index[0], self._index[1], now)
        return self._index[1]

    def refresh_snapshot(self) -> None:
        """Forget the cached index: the next request reads the snapshot again."""
        self._index = None

    def topology(self, fmt: str) -> dict[str, Any] | str:
        snap = self._snapshot()
        tree = build_tree(snap.nodes.values())
        if fmt == "mermaid":
            return to_mermaid(tree)
        return {"generated_at": snap.generated_at, **tree.to_json()}

    def capacity(self) -> dict[str, Any]:
        """Free capacity per layer and the largest job that could start now (domain/capacity.py), as
        of the snapshot's last pass."""
        from topogov.domain.capacity import stored_or_made

        snap = self._snapshot()
        if self._capacity is None or self._capacity[0] is not snap:
            # the pass that wrote the snapshot made the view; one written before it did is made here
            # (~0.25 s of CPU at 10,000 nodes)
            view = stored_or_made(snap.capacity, snap.nodes)
            self._capacity = (snap, {"generated_at": snap.generated_at, **view})
        return self._capacity[1]

    def fleet_map(self, caller: Caller) -> dict[str, Any]:
        """The capacity view with the GPU nodes one by one and the running jobs on them
        (domain/fleet_map.py), as ``caller`` may see them: other teams' jobs by team only unless
        the caller is an admin. The rows are built once per snapshot; only the names are per caller."""
        from topogov.domain.fleet_map import NODE_COLUMNS, node_rows, visible_jobs

        view = self.capacity()
        snap = self._snapshot()
        if self._fleet_map is None or self._fleet_map[0] is not snap:
            self._fleet_map = (snap, *node_rows(snap.nodes, snap.running))
        _, rows, jobs = self._fleet_map
        admin = self.policy.is_admin(caller.principal)
        mine = set(self.policy.teams_for_principal(caller.principal))
        team_of = {t.namespace: name for name, t in self.policy.teams.items()}
        shown = visible_jobs(jobs, team_of=team_of, shows=lambda team: admin or team in mine)
        return {**view, "node_columns": list(NODE_COLUMNS), "nodes": rows, "jobs": shown}

    # -- submit -----------------------------------------------------------------------------------
    def submit(
        self, request: JobRequest | ManifestRequest, *, caller: Caller, dry_run: bool
    ) -> SubmitResponse:
        policy, hyperpod = self.policy_now(), self.mode().hyperpod
        # a high-level request is rendered as the kind the cluster runs: discovery (kept 5 minutes)
        served = self.jobs.served_kinds() if isinstance(request, JobRequest) else frozenset({"Job"})
        adm = decide(
            request,
            caller=caller,
            policy=policy,
            index=self.index,
            hyperpod=hyperpod,
            defaults=self.pod_defaults,
            served=served,
        )
        d = adm.decision
        if d.topology.domain_now and self._snapshot_at:
            # "fits now" is the snapshot's: say how old it is (the API cannot read Nodes to check)
            from topogov.logic.estimates import epoch

            age = max(0, round((epoch(self.clock()) or time.time()) - self._snapshot_at))
            d.topology.reason += (
                f"; as of the node snapshot, changed {_ago(age)} ago (checked at each scheduled pass)"
            )
        if dry_run:
            used = self.ledger.usage(d.team)
            for line in d.quota:
                attr = next(a for a, n in RESOURCE_ATTRS.items() if n == line.resource)
                line.in_flight_before = getattr(used, attr)
            return SubmitResponse(dry_run=True, created=False, decision=d, job=adm.manifest)
        name = adm.shape.name
        self.ledger.reserve(d.team, name, adm.charge, adm.cap, self._record(request, adm, caller))
        created = self._create(d.team, d.namespace, name, adm)
        try:
            confirmed = self.ledger.confirm(d.team, name, {"job_uid": created.uid})
        except Unavailable:  # the ledger is unreachable: the Job exists and its charge is held
            confirmed = True  # the record stays `reserving`; the reconcile pass confirms it
        if not confirmed and (self.ledger.get(d.team, name) or {}).get("state") == "submitted":
            confirmed = True  # the reconcile pass confirmed it first
        if not confirmed:
            # Cancelled while the Job was being created: the cancel won (its charge is released),
            # so the Job must not run uncharged.
            self.jobs.delete(d.namespace, name, created.kind)
            raise Conflict(
                f"job {name!r} was cancelled while it was being submitted", {"team": d.team, "name": name}
            )
        # The created Job, whole, is the answer (the one reader of a JobView's raw body).
        return SubmitResponse(dry_run=False, created=True, decision=d, job=dict(created.raw))

    def _record(
        self, request: JobRequest | ManifestRequest, adm: Admission, caller: Caller
    ) -> dict[str, Any]:
        """The ledger record of a submission: who, when, what was decided and asked, its first event."""
        d = adm.decision
        return {
            "submitted_by": caller.arn,
            "submitted_at": self.clock(),
            "namespace": d.namespace,
            # the decision without the nodes it would fit on at submission (up to one per pod)
            "decision": d.model_dump(mode="json", exclude={"topology": {"nodes_now"}}),
            "request": stored_request(request, adm.shape.kind),
            "job_kind": adm.shape.kind.rsplit(" ", 1)[-1],
            # what a pending job's "waiting" view needs of its pods (per pod GPUs, instance type)
            "shape": {"per_pod_gpu": adm.shape.per_pod.gpu, "instance_type": adm.shape.instance_type},
            "events": [
                {"at": self.clock(), "what": "submitted", "topology": d.topology.model_dump(mode="json")}
            ],
        }

    def _create(self, team: str, namespace: str, name: str, adm: Admission) -> JobView:
        """Create the charged job and what is made with it (owned by it); on failure refund the charge
        and remove the record (and the job, when its creation may have landed unseen, or when what is
        made with it could not be), so nothing is charged without a job or left behind."""
        kind = adm.shape.kind.rsplit(" ", 1)[-1]
        created: JobView | None = None
        try:
            created = self.jobs.create(namespace, adm.manifest)
            for companion in adm.companions:
                self.jobs.create_owned(namespace, companion, created)
            return created
        except Exception as exc:
            if created is not None or not isinstance(exc, Refusal) or isinstance(exc, Unavailable):
                # The answer may have been lost after the job was created (a timeout), or it was
                # created and what goes with it was not: remove it, so there is never a job without a
                # record. (Not on a 409 for the job itself: that job is someone else's.)
                with contextlib.suppress(Exception):
                    self.jobs.delete(namespace, name, kind)
            self.ledger.abort(team, name, adm.charge)
            if isinstance(exc, Refusal):
                raise
            raise Unavailable(f"creating the {kind} failed: {type(exc).__name__}") from exc

    def submit_once(
        self, request: JobRequest | ManifestRequest, *, caller: Caller, dry_run: bool, key: str | None
    ) -> dict[str, Any]:
        """``submit`` made idempotent by the caller's ``Idempotency-Key``: a retry gets the first answer
        and charges nothing twice; the same key with another body is refused (Conflict)."""
        if not key or self.idempotency_store is None:
            return self.submit(request, caller=caller, dry_run=dry_run).model_dump(mode="json")
        if self._idempotent is None:
            from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig, idempotent_function

            config = IdempotencyConfig(
                event_key_jmespath="[key, caller]",
                payload_validation_jmespath="[body, dry_run]",
                expires_after_seconds=24 * 3600,
                raise_on_no_idempotency_key=True,
            )

            @idempotent_function(  # type: ignore[untyped-decorator]  # Powertools' decorator is untyped
                data_keyword_argument="submission", persistence_store=self.idempotency_store, config=config
            )
            def once(submission: dict[str, Any]) -> dict[str, Any]:
                req = (ManifestRequest if "manifest" in submission["body"] else JobRequest).model_validate(
                    submission["body"]
                )
                who = Caller(submission["caller"], submission["principal"])
                out = self.submit(req, caller=who, dry_run=submission["dry_run"])
                return out.model_dump(mode="json")

            self._idempotent = once
            self._idempotency_config = config
        if self.lambda_context is not None:
            self._idempotency_config.register_lambda_context(self.lambda_context)
        from aws_lambda_powertools.utilities.idempotency.exceptions import IdempotencyValidationError

        from topogov.domain.errors import Conflict

        submission = {
            "key": key,
            "caller": caller.arn,
            "principal": caller.principal,
            "dry_run": dry_run,
            "body": request.model_dump(mode="json"),
        }
        try:
            answer: dict[str, Any] = self._idempotent(submission=submission)
            return answer
        except IdempotencyValidationError:
            raise Conflict(
                "this Idempotency-Key was used with another request body", {"field": "Idempotency-Key"}
            ) from None

    # -- read -------------------------------------------------------------------------------------
    def _authorize(self, caller: Caller, team: str) -> Team:
        if team not in self.policy.teams:
            from topogov.logic.admission import teams_hint

            raise NotFound(f"no team {team!r}; {teams_hint(self.policy, caller)}", {"team": team})
        if not self.policy.is_admin(caller.principal) and team not in self.policy.teams_for_principal(
            caller.principal
        ):
            raise Forbidden(f"you are not a principal of team {team!r}", {"team": team})
        return self.policy.teams[team]

    def require_member(self, caller: Caller) -> None:
        """The fleet's topology and capacity (node names, where every team's GPU pods run) are for the
        principals of a team and the admins, not for anyone else the account lets call the API."""
        if not self.policy.is_admin(caller.principal) and not self.policy.teams_for_principal(
            caller.principal
        ):
            raise Forbidden("the fleet's topology is for the principals of a team and the admins")

    def visible_teams(self, caller: Caller) -> list[str]:
        if self.policy.is_admin(caller.principal):
            return sorted(self.policy.teams)
        return sorted(self.policy.teams_for_principal(caller.principal))

    def job(self, caller: Caller, team: str, name: str) -> dict[str, Any]:
        """One job: its status from the Job and its Workload, Kueue's reason while pending, where its
        Pods landed (nodes and network domains), and its events (the ledger's and Kueue's)."""
        from topogov.domain.jobs import job_status
        from topogov.domain.landing import kueue_events, landing, pods_from

        self._authorize(caller, team)
        record = self.ledger.get(team, name)
        if record is None:
            raise NotFound(f"no job {name!r} in team {team!r}", {"team": team, "name": name})
        kind = record.get("job_kind") or "Job"
        job = self.jobs.get(record["namespace"], name, kind)
        workload = None
        placement = None
        if job is not None:
            workload = self.jobs.workload_for(record["namespace"], job.uid)
            if not job.suspended or job.active:
                pods = pods_from(self.jobs.pods_of(record["namespace"], job))
                asked = ((record.get("decision") or {}).get("topology") or {}).get("level")
                placement = landing(pods, self._snapshot_nodes(), asked)
        status, why = _released_status(record, *job_status(job, workload))
        events = [*record.get("events", []), *kueue_events(workload)]
        waiting = self._waiting(caller, team, record) if status == "Pending" else None
        estimate = self.estimates(caller, [(team, name)]).get((team, name)) if status == "Pending" else None
        return {
            "team": team,
            "name": name,
            "namespace": record["namespace"],
            "kind": kind,
            "status": status,
            "why_pending": why,
            "state": record.get("state"),
            "ran_s": record.get("ran_s"),  # a finished job's run time, once the reconcile pass released it
            "submitted_by": record.get("submitted_by"),
            "submitted_at": record.get("submitted_at"),
            "decision": record.get("decision"),
            "fallback": record.get("fallback"),
            "placement": placement,
            "waiting": waiting,
            "estimate": estimate,
            "events": sorted(events, key=lambda e: e.get("at") or ""),
        }

    def _waiting(self, caller: Caller, team: str, record: dict[str, Any]) -> dict[str, Any] | None:
        """For a pending job that asked for a topology level: the domain that comes closest, what
        runs there (other teams' jobs by team only, unless the caller is an admin) and what would
        have to finish or be preempted. One list of Kueue's pods per team namespace."""
        from topogov.domain.capacity import closest_domain
        from topogov.domain.placement_quality import job_pod

        decision = record.get("decision") or {}
        topo = decision.get("topology") or {}
        level, pods = topo.get("level"), int(decision.get("pods") or 0)
        per_pod = (record.get("shape") or {}).get("per_pod_gpu")
        if not level or not pods or per_pod is None:
            return None
        running = []
        for t in self.policy.teams.values():
            for pod in self.jobs.kueue_pods(t.namespace):
                found = job_pod(pod, pod.requests.gpu)
                if found is not None:
                    running.append(found)
        priorities = {c.name: c.value for c in self.policy.priority_classes}
        found_domain = closest_domain(
            self._snapshot_nodes(), running, level=level, pods=pods, gpus_per_pod=int(per_pod),
            instance_type=(record.get("shape") or {}).get("instance_type"), priority_of=priorities,
            priority=int(decision.get("priority_value") or 0),
        )  # fmt: skip
        if found_domain is None:
            return None
        admin = self.policy.is_admin(caller.principal)
        by_namespace = {t.namespace: name for name, t in self.policy.teams.items()}

        def shown(job: dict[str, Any]) -> dict[str, Any]:
            owner = by_namespace.get(job["namespace"], job["namespace"])
            mine = admin or owner == team
            return {**job, "team": owner, "job": job["job"] if mine else None}

        return {
            **found_domain,
            "occupants": [shown(j) for j in found_domain["occupants"]],
            "to_free": None
            if found_domain["to_free"] is None
            else [shown(j) for j in found_domain["to_free"]],
        }

    def _snapshot_nodes(self) -> dict[str, Any]:
        try:
            return dict(self._snapshot().nodes)
        except TopologyUnavailable:
            return {}

    def jobs_of(
        self, caller: Caller, team: str | None, limit: int = DEFAULT_PAGE, token: str | None = None
    ) -> tuple[list[dict[str, Any]], str | None]:
        """A page of the jobs of ``team`` (else of every team the caller sees), in team and name
        order, with their status and where they landed; and the token of the next page (None after
        the last). At most ``limit`` of Topogov's records a page, read a page at a time from the
        ledger (finished jobs are listed until their records expire); per team on the page, three
        list calls (Jobs, Workloads, Kueue's pods), not one per job. A team's first page also shows
        the jobs submitted with ``hyp create hyp-pytorch-job`` (read-only)."""
        teams = [team] if team else self.visible_teams(caller)
        start, after = _page_token(token, teams)
        out: list[dict[str, Any]] = []
        pending: list[tuple[str, str]] = []
        for i in range(start, len(teams)):
            t = teams[i]
            after = after if i == start else None
            rows, after = self._team_page(caller, t, limit - len(out), after, pending)
            out.extend(rows)
            if after is not None:
                return self._with_etas(caller, out, pending), _token(t, after)
            if len(out) >= limit and i + 1 < len(teams):
                return self._with_etas(caller, out, pending), _token(teams[i + 1], None)
        return self._with_etas(caller, out, pending), None

    def _team_page(
        self, caller: Caller, team: str, limit: int, after: str | None, pending: list[tuple[str, str]]
    ) -> tuple[list[dict[str, Any]], str | None]:
        """One team's rows of a page (its read-only rows first, on its first page) and the name to
        continue after (None: the team is done)."""
        namespace = self._authorize(caller, team).namespace
        records, more = self.ledger.page(team, max(1, limit), after)
        workloads = self.jobs.workloads(namespace)
        foreign = (
            [w for w in workloads if _read_only(w) and self.ledger.get(team, w.owner_name) is None]
            if after is None
            else []
        )
        if not records and not foreign:
            return [], more
        nodes = self._snapshot_nodes()
        pods_by_uid: dict[str, list[PodView]] = {}
        for pod in self.jobs.kueue_pods(namespace):
            key = pod_owner(pod.labels)
            if key is not None:
                pods_by_uid.setdefault(key, []).append(pod)
        rows = [_read_only_row(team, w, pods_by_uid, nodes) for w in foreign]
        if records:
            live = {(j.kind, j.name): j for j in self.jobs.list_jobs(namespace)}
            by_uid: dict[str | None, WorkloadView] = {w.owner_uid: w for w in workloads}
            by_uid.update({w.labels.get(WORKLOAD_JOB_UID_LABEL): w for w in workloads})
            for r in records:
                status, row = _job_row(team, namespace, r, live, by_uid, pods_by_uid, nodes)
                if status == "Pending":
                    pending.append((team, r["name"]))
                rows.append(row)
        return rows, more

    def _with_etas(
        self, caller: Caller, rows: list[dict[str, Any]], pending: list[tuple[str, str]]
    ) -> list[dict[str, Any]]:
        """The page's pending jobs with their estimated start (one run of the model for all)."""
        if pending:
            etas = self.estimates(caller, pending, alternatives=False, budget_s=5.0, detail=False)
            for j in rows:
                est = etas.get((j["team"], j["name"]))
                if not j.get("read_only"):
                    j["eta"] = (
                        None if est is None else {k: est.get(k) for k in ("start_in_s", "start_at", "error")}
                    )
        return rows

    # -- start estimates ----------------------------------------------------------------------------
    def _forecaster(self) -> Any:
        """The Kueue model of the current snapshot and the cluster it last forecast from, kept
        while the snapshot and the policy in force are the same (logic/whatif/forecast.Forecaster)."""
        from topogov.logic.whatif.forecast import Forecaster, Model

        snap = self._snapshot()
        policy = self.policy_now()
        held = self._model
        # the snapshot held: its id is not reused; the policy re-read on HyperPod compares by value
        if held is None or held[0] is not snap or (held[1] is not policy and held[1] != policy):
            model = Model(list(snap.nodes.values()), policy)
            held = self._model = (snap, policy, Forecaster(model, on_build=self.keep_long_lived))
        return held[2]

    def _estimate_state(self, kept: Any, jobs: list[tuple[str, str]], now_s: float) -> Any:
        """The Workloads, Jobs and ledger records as the model's inputs (logic/estimates.State): those
        read for the last request while they are at most the kept run's freshness old (the answer
        says its age) and hold each asked job as waiting, else read again (a job submitted since has
        no Workload in them)."""
        from topogov.logic import estimates as est

        last = self._state
        if last is not None and last[1] is kept and 0.0 <= now_s - last[0] <= kept.fresh_s:
            waiting = {q.workload.name for q in last[2].queued}
            if all(last[2].key_of(*j) in waiting for j in jobs):
                return last[2]
        self._workloads = self._workloads or est.WorkloadCache()
        state = est.read_state(self.policy, kept.model, self.ledger, self.jobs, self._workloads)
        self._state = (now_s, kept, state)
        return state

    def estimates(
        self,
        caller: Caller,
        jobs: list[tuple[str, str]],
        *,
        alternatives: bool = True,
        budget_s: float = 8.0,
        detail: bool = True,
    ) -> dict[tuple[str, str], dict[str, Any]]:
        """Each pending job's estimated start (logic/estimates.py): one run of the Kueue model forward
        from now for all of them, for at most ``budget_s`` (API Gateway answers within 29 s; a job
        the run has not reached by then says so); the cheaper ways to start now too when
        ``alternatives``; only when it starts (``estimates.when``: the list's ETA column) unless
        ``detail`` (what each waits for, the bases: a list of a few thousand running jobs each)."""
        from topogov.logic import estimates as est

        until = self.monotonic() + budget_s

        try:
            kept = self._forecaster()
        except (TopologyUnavailable, QuotasUnavailable) as exc:
            return {j: {"start_in_s": None, "start_at": None, "error": exc.message} for j in jobs}
        now_s = est.epoch(self.clock()) or time.time()
        state = self._estimate_state(kept, jobs, now_s)
        keys = {j: state.key_of(*j) for j in jobs}
        at = self.monotonic()
        found = est.estimate_all(
            kept,
            state,
            [k for k in keys.values() if k],
            now_s=now_s,
            at=at,
            stop=lambda: self.monotonic() > until,
        )
        snap = self._snapshot()
        nodes = dict(snap.nodes)
        as_of = now_s - snap.generated_at if snap.generated_at else None
        admin = self.policy.is_admin(caller.principal)

        def shown_for(team: str) -> Any:
            def shown(owner: Any) -> dict[str, Any]:
                return {"team": owner.team, "job": owner.job if admin or owner.team == team else None}

            return shown

        out: dict[tuple[str, str], dict[str, Any]] = {}
        for job, key in keys.items():
            if key is None or key not in found:
                why = "Kueue has no Workload for this Job yet" if key is None else "not pending in Kueue"
                out[job] = {"start_in_s": None, "start_at": None, "error": why}
                continue
            if not detail:
                out[job] = est.when(found[key], state, now_s=now_s)
                continue
            alt = est.alternatives_for(kept, state, key, now_s=now_s, at=at) if alternatives else None
            out[job] = {**est.describe(
                found[key], state, nodes=nodes, shown=shown_for(job[0]), now_s=now_s, as_of_s=as_of,
                alternative=alt,
            ), "kueue": self.kueue_modelled()}  # fmt: skip
        return out

    def kueue_modelled(self) -> dict[str, object]:
        """The Kueue release the cluster runs, where that was learnt, the model profile answering
        and, for a release without one, what may differ (``domain/kueue_version.py``)."""
        from topogov.domain.errors import TopogovError
        from topogov.domain.kueue_version import UNKNOWN

        try:
            found = self.kueue.kueue_release() if self.kueue is not None else UNKNOWN
        except TopogovError:  # the cluster not reachable: the estimate stands, the release unknown
            found = UNKNOWN
        return found.as_json()

    def cancel(self, caller: Caller, team: str, name: str) -> dict[str, Any]:
        t = self._authorize(caller, team)
        record = self.ledger.get(team, name)
        if record is None:
            self._refuse_read_only(t.namespace, team, name)
            raise NotFound(f"no job {name!r} in team {team!r}", {"team": team, "name": name})
        kind = record.get("job_kind") or "Job"
        job = self.jobs.get(record["namespace"], name, kind)
        if job is not None and job.labels.get(MANAGED_BY_LABEL) != MANAGED_BY:
            # A Job of that name made outside Topogov (after its own was released, say): not Topogov's
            # to delete, so nothing is done.
            raise Conflict(
                f"the {kind} {name!r} in {record['namespace']} was not created by Topogov (it lacks "
                f"{MANAGED_BY_LABEL}={MANAGED_BY}): not cancelled",
                {"team": team, "name": name},
            )
        deleted = self.jobs.delete(record["namespace"], name, kind) if job is not None else False
        released = self.ledger.release(team, name, "cancelled")
        return {"team": team, "name": name, "kind": kind, "job_deleted": deleted, "charge_released": released}

    def _refuse_read_only(self, namespace: str, team: str, name: str) -> None:
        """A job Topogov did not submit but shows (a HyperPodPyTorchJob's Workload) is not Topogov's to
        cancel: 409, saying how to stop it."""
        from topogov.domain.jobs import READ_ONLY_KINDS

        for w in self.jobs.workloads(namespace):
            if w.owner_kind in READ_ONLY_KINDS and w.owner_name == name:
                made_by, stop = READ_ONLY_KINDS[w.owner_kind]
                raise Conflict(
                    f"{name!r} is a {w.owner_kind} submitted with `{made_by}`, not through Topogov: it is "
                    f"shown read-only here; stop it with `{stop.format(name=name, ns=namespace)}`",
                    {"team": team, "name": name, "kind": w.owner_kind, "read_only": True},
                )

    def team_view(self, caller: Caller, team: str) -> dict[str, Any]:
        self._authorize(caller, team)
        t = self.policy_now().teams[team]
        used = self.ledger.usage(team)
        mode = self.mode()

        def res(r: Resources) -> dict[str, int]:
            return {RESOURCE_ATTRS[a]: getattr(r, a) for a in RESOURCE_ATTRS}

        return {
            "team": team,
            "namespace": t.namespace,
            "local_queue": t.local_queue,
            "quota": res(t.quota_resources),
            "borrow_limit": res(t.borrow_resources),
            "max_in_flight": res(t.max_in_flight_resources),
            "in_flight": res(used),
            "admitted": res(self.jobs.admitted_usage(t.namespace)),
            "priority_classes": list(t.priority_class_names),
            "default_priority_class": t.default_priority_class,
            "placement": self._placement_of(team),
            "quota_source": f"ClusterQueue {t.namespace}-clusterqueue (HyperPod task governance)"
            if mode.hyperpod
            else "teams.yaml",
        }

    # -- what if (admins) ----------------------------------------------------------------------------
    def require_admin(self, caller: Caller) -> None:
        if not self.policy.is_admin(caller.principal):
            raise Forbidden("what-if replays are for the policy's admins (teams.yaml: admins)")

    def whatif(self, caller: Caller, request: WhatIfRequest) -> dict[str, Any]:
        """``topogov whatif`` on the current snapshot's fleet: the trace under the policy in force
        (``baseline``) and under ``request.policy`` and/or the fleet changes (``proposed``). Admins
        only: a proposed policy and another team's trace are not a member's to see. The request is
        read (and refused, field by field) by :mod:`topogov.logic.whatif.request`."""
        from topogov.logic.estimates import epoch
        from topogov.logic.whatif import compare
        from topogov.logic.whatif import request as read

        self.require_admin(caller)
        history = None
        if request.history is not None:
            now = epoch(self.clock()) or time.time()
            records = [r for team in sorted(self.policy.teams) for r in self.ledger.list(team)]
            history = read.history_of(records, request.history, now)
            trace = history.jobs
        else:
            trace = read.trace_of(request.trace or "")
        read.check_size(trace, history is not None)
        proposed = self.policy if request.policy is None else read.policy_of(request.policy)
        nodes, changed = read.fleets_of(self._snapshot().nodes.values(), request.fleet_change)
        named = {"baseline": (nodes, self.policy_now())}
        if request.policy is not None or request.fleet_change:
            named["proposed"] = (changed, proposed)
        out = compare(trace, named, regime=request.regime, release_lag_s=request.release_lag_s)
        extra = {"history": self._history_summary(history, request.history)} if history else {}
        nodes_of = {k: len(v[0]) for k, v in named.items()}
        return {"jobs": len(trace), "nodes": nodes_of, "kueue": self.kueue_modelled(), **extra, **out}

    def _history_summary(self, history: Any, window: str | None) -> dict[str, Any]:
        """The replayed history's summary, with how far back the ledger can see: a finished job's
        record is kept ``jobRetentionDays`` after it ended (DynamoDB's time to live)."""
        from topogov.domain.submission import parse_window

        kept_s = self.policy.job_retention_days * 86400
        summary: dict[str, Any] = {**history.summary(), "retention_days": self.policy.job_retention_days}
        if window is not None and parse_window(window) > kept_s:
            summary["note"] = (
                f"the ledger keeps a finished job {self.policy.job_retention_days} days: jobs that ended "
                f"earlier in the {window} window are not in it"
            )
        return summary

    def _placement_of(self, team: str) -> dict[str, Any] | None:
        """How tight the team's running multi-pod jobs were at the last pass, beside the fleet's."""
        try:
            quality = self._snapshot().placement
        except TopologyUnavailable:
            return None
        if not quality:
            return None
        empty = {"jobs": 0, "in_one_domain": {}}
        fleet = {"jobs": quality.get("jobs", 0), "in_one_domain": quality.get("in_one_domain", {})}
        return {"team": (quality.get("teams") or {}).get(team, empty), "fleet": fleet}
