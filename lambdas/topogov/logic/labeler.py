"""One reconcile pass of the labeler: EC2 topology -> node labels, and the topology snapshot.

Logic only: EC2, Kubernetes and the snapshot store come in as ports, so tests drive it with the
real adapters against local servers, or with fakes for pure unit tests.

What a pass asks EC2 (and nothing more): instances it has never seen, instances named by a
state-change event, and instances whose last answer is older than ``refresh_after_s``. A running
instance's network nodes do not change, so everything else comes from the snapshot.

EKS's own labels (EKS User Guide, "Place distributed AI/ML workloads with network topology labels",
https://docs.aws.amazon.com/eks/latest/userguide/ml-workload-topology.html): a node that already
carries its complete ``network-node-layer-*`` labels when the snapshot has no answer for its instance
is *adopted*: its labels become the answer (``InstanceTopology.adopted_at``; ``fetched_at`` stays
when EC2 last confirmed it, 0 until then) with no EC2 call and nothing written. An adopted answer is
verified against EC2 every ``verify_after_s`` (not ``refresh_after_s``: EKS keeps those labels in
step), at once if the node's labels stop matching it, and always for an instance an event names (a
stop/start moves it). What EC2 answers then wins: drift is corrected as for any answer. Partial
labels (a gap, too few layers for the type) are asked of EC2 as if there were none.

SageMaker HyperPod (``domain/hyperpod/mode.py`` decides the mode on each full pass, from the
deployment's cluster ARN and the task governance add-on's namespaces): a HyperPod node is never
labelled nor asked of EC2 in either mode (its instance lives in SageMaker's account; HyperPod sets its
topology labels). In HyperPod mode the pass writes no node label at all and calls no EC2: every node's
snapshot entry is made from the labels it carries (the instance type without HyperPod's ``ml.``, the
layers, ``ultraserver-id`` as the innermost level, unavailable when its health label or a taint says
so, :class:`~topogov.domain.views.nodes.NodeView`). The summary says which mode the pass ran in and why.
"""

from __future__ import annotations

import enum
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Protocol

from topogov.domain.errors import KubernetesError, SnapshotError
from topogov.domain.hyperpod.mode import Mode, detect, mode_in_force
from topogov.domain.labels import (
    InstanceTopology,
    LabelPatch,
    adopted_topology,
    apply_patch,
    label_patch,
    stale_layer_patch,
)
from topogov.domain.nodes import NodeKind
from topogov.domain.placement_quality import JobPod
from topogov.domain.quantity import Resources
from topogov.domain.snapshot import Snapshot
from topogov.domain.tree import NodeCapacity
from topogov.domain.views.nodes import NodeView
from topogov.logic.ports import Counters


class Skip(enum.StrEnum):
    NO_PROVIDER_ID = NodeKind.NO_PROVIDER_ID.value
    NOT_EC2 = NodeKind.NOT_EC2.value
    HYPERPOD = NodeKind.HYPERPOD.value
    MALFORMED = NodeKind.MALFORMED.value
    HYPERPOD_MODE = "hyperpod_mode"  # an EC2 node of a HyperPod-mode cluster: read as labelled, never written
    NOT_IN_EC2_ANSWER = "not_in_ec2_answer"  # unsupported type, not running: layer labels removed
    PENDING = "pending"  # not asked yet: time budget or EC2 error; the next pass continues
    NODE_GONE = "node_gone"  # deleted between list and patch
    NODE_NOT_REGISTERED = "node_not_registered"  # event for an instance whose node has not joined


# --- ports -------------------------------------------------------------------------------------


class DescribeOutcome(Protocol):
    answers: dict[str, InstanceTopology]
    asked: list[str]
    unasked: list[str]
    calls: int
    retries: int
    error: str | None


class TopologySource(Protocol):
    def describe(
        self, instance_ids: Sequence[str], deadline: float, fleet: Mapping[str, str] | None = None
    ) -> DescribeOutcome:
        """``fleet``: the cluster's instance types by instance id (how the source may choose to ask)."""
        ...


class PatchOutcomeLike(Protocol):
    @property
    def outcome(self) -> str: ...
    @property
    def status(self) -> int: ...
    @property
    def message(self) -> str: ...


class NodeStore(Protocol):
    @property
    def counters(self) -> Counters: ...
    def list_nodes(self) -> list[NodeView]: ...
    def get_node(self, name: str) -> NodeView | None: ...
    def patch_labels(self, name: str, patch: Mapping[str, str | None]) -> PatchOutcomeLike: ...
    def scan_pods(self) -> tuple[dict[str, Resources], list[JobPod]]: ...
    def pod_defaults(self) -> dict[str, Any]: ...


class SnapshotStore(Protocol):
    def load(self) -> Snapshot | None: ...
    def save(self, snapshot: Snapshot) -> None: ...


# --- result ------------------------------------------------------------------------------------


@dataclass(slots=True)
class PassSummary:
    mode: str  # "full" or "targeted"
    nodes_seen: int = 0
    ec2_backed: int = 0
    with_topology: int = 0
    patched: int = 0
    unchanged: int = 0
    failed: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    ec2_calls: int = 0
    ec2_retries: int = 0
    ec2_instances_asked: int = 0
    adopted: int = 0  # answers taken from the labels EKS wrote (no EC2 call)
    verified: int = 0  # adopted answers EC2 was asked about this pass (their cadence, or drift)
    ec2_missing: list[str] = field(default_factory=list)  # asked, not in EC2's answer (reported)
    ec2_error: str | None = None
    k8s_reads: int = 0
    k8s_writes: int = 0
    complete: bool = True  # False when the budget or an error left work for the next pass
    duration_s: float = 0.0
    failures: list[dict[str, Any]] = field(default_factory=list)
    snapshot_written: bool = False  # only when its content changed
    snapshot_error: str | None = None
    cluster_mode: str = "eks"  # "hyperpod" or "eks" (domain/hyperpod/mode.py)
    cluster_mode_why: str = ""
    hyperpod_nodes: int = 0
    unavailable: int = 0  # nodes Kueue leaves out now (not Ready, cordoned, tainted, HyperPod health)
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class PassOptions:
    refresh_after_s: float = 24 * 3600
    verify_after_s: float = 24 * 3600  # adopted answers: verified against EC2 this often
    deadline: float = float("inf")  # on the monotonic clock
    targeted_instance_ids: frozenset[str] | None = None  # None = full pass
    collect_requested: bool = True


# --- the pass ----------------------------------------------------------------------------------


def instances_to_ask(
    instance_ids: Iterable[str],
    snapshot: Snapshot,
    now: float,
    refresh_after_s: float,
    forced: Iterable[str] = (),
    *,
    verify_after_s: float | None = None,
) -> list[str]:
    """Which instances EC2 must be asked about: unknown first, then forced, then stale. An EC2
    answer (or absence) is stale after ``refresh_after_s``; an adopted answer after ``verify_after_s``
    (default: the same) from when it was last confirmed (adopted, or verified by EC2)."""
    verify_every = refresh_after_s if verify_after_s is None else verify_after_s
    unknown: list[str] = []
    stale: list[str] = []
    forced_set = set(forced)
    for iid in dict.fromkeys(instance_ids):
        if iid in forced_set:
            continue
        known = snapshot.instances.get(iid)
        seen_at: float | None
        if known is not None:
            seen_at, every = (
                (known.checked_at, verify_every) if known.adopted else (known.fetched_at, refresh_after_s)
            )
        else:
            seen_at, every = snapshot.absent.get(iid), refresh_after_s
        if seen_at is None:
            unknown.append(iid)
        elif now - seen_at >= every:
            stale.append(iid)
    return unknown + sorted(forced_set) + stale


@dataclass(slots=True)
class _Pass:
    """One pass's working state, handed from step to step."""

    options: PassOptions
    summary: PassSummary
    snapshot: Snapshot
    skips: Counter[str] = field(default_factory=Counter)
    views: list[NodeView] = field(default_factory=list)
    ec2_nodes: list[tuple[NodeView, str]] = field(default_factory=list)
    final_labels: dict[str, Mapping[str, str]] = field(default_factory=dict)
    gone: set[str] = field(default_factory=set)
    pods: list[JobPod] | None = None  # a full pass's: Kueue's running pods, when they could be listed


@dataclass(frozen=True, slots=True)
class PassOutcome:
    """What one pass found and did: its summary, the snapshot as it left it (the governor's input),
    the cluster's mode it ran in, and on a full pass the running pods it listed (None when it listed
    none: a targeted pass, or the list failed)."""

    summary: PassSummary
    snapshot: Snapshot
    mode: Mode
    pods: list[JobPod] | None


class Labeler:
    def __init__(
        self,
        nodes: NodeStore,
        ec2: TopologySource,
        store: SnapshotStore,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        patch_concurrency: int = 1,
        hyperpod_cluster_arn: str | None = None,
        addon_namespaces: Callable[[], list[str]] | None = None,
        team_of: Mapping[str, str] | None = None,
    ) -> None:
        self._nodes = nodes
        self.hyperpod_cluster_arn = hyperpod_cluster_arn  # the deployment's (TOPOGOV_HYPERPOD_CLUSTER_ARN)
        self._addon_namespaces = addon_namespaces  # the namespaces labelled sagemaker-managed-queue
        self._patch_concurrency = max(1, patch_concurrency)
        self._ec2 = ec2
        self._store = store
        self._clock = clock
        self._wall = wall
        self._team_of = dict(team_of or {})  # namespace -> team, for the placement quality per team

    def run(self, options: PassOptions) -> PassSummary:
        """One pass; its summary (:meth:`reconcile` returns the rest of what it found)."""
        return self.reconcile(options).summary

    def reconcile(self, options: PassOptions) -> PassOutcome:
        """One pass: the nodes selected, their topology learned and labelled (not in HyperPod mode),
        the snapshot refreshed and written if it changed."""
        started = self._clock()
        reads0, writes0 = self._nodes.counters.reads, self._nodes.counters.writes
        summary = PassSummary(mode="full" if options.targeted_instance_ids is None else "targeted")
        snapshot = self._load_snapshot(summary)
        before = (
            dict(snapshot.instances), dict(snapshot.absent), dict(snapshot.nodes), snapshot.placement,
            snapshot.running, snapshot.mode, snapshot.pod_defaults,
        )  # fmt: skip
        work = _Pass(options, summary, snapshot)
        self._select_nodes(work)
        mode = self._mode(work)
        if not mode.hyperpod:
            self._learn_topology(work)
            self._label_nodes(work)
        self._refresh_snapshot(work)
        if options.targeted_instance_ids is None:
            snapshot.mode = mode.to_json()
        self._save_if_changed(work, before)
        summary.skipped = dict(sorted(work.skips.items()))
        summary.k8s_reads = self._nodes.counters.reads - reads0
        summary.k8s_writes = self._nodes.counters.writes - writes0
        summary.duration_s = round(self._clock() - started, 4)
        return PassOutcome(summary, snapshot, mode, work.pods)

    # -- the steps of a pass ------------------------------------------------------------------

    def _select_nodes(self, work: _Pass) -> None:
        """The nodes of the pass (all, or those of the targeted instances) and which are EC2's."""
        options, skips = work.options, work.skips
        if options.targeted_instance_ids is None:
            work.views = self._nodes.list_nodes()
        else:
            work.views, not_registered = self._targeted_views(options.targeted_instance_ids, work.snapshot)
            if not_registered:
                skips[Skip.NODE_NOT_REGISTERED] += len(not_registered)
        for view in work.views:
            ref = view.ref
            if ref.kind is NodeKind.EC2:
                work.ec2_nodes.append((view, ref.instance_id))
            else:
                skips[ref.kind.value] += 1
        work.summary.nodes_seen = len(work.views)
        work.summary.ec2_backed = len(work.ec2_nodes)
        work.summary.hyperpod_nodes = skips[NodeKind.HYPERPOD.value]
        work.summary.unavailable = sum(1 for v in work.views if not v.available)

    def _mode(self, work: _Pass) -> Mode:
        """The cluster's mode: detected on a full pass (one list of the add-on's namespaces); a
        targeted pass keeps the last full pass's. In HyperPod mode no node is labelled or asked of EC2:
        the EC2 nodes are left out of the pass's writes like the HyperPod ones."""
        summary, snapshot = work.summary, work.snapshot
        previous = mode_in_force(snapshot.mode, self.hyperpod_cluster_arn)
        if work.options.targeted_instance_ids is not None:
            mode = previous
        else:
            try:
                namespaces = self._addon_namespaces() if self._addon_namespaces is not None else []
            except KubernetesError as exc:
                # Unreadable: the last pass's answer stands (never the plain mode by default, whose
                # governor would write the add-on's queues).
                summary.failures.append({"node": None, "status": exc.status, "message": str(exc)})
                summary.complete = False
                namespaces = list(previous.addon_namespaces)
            mode = detect(self.hyperpod_cluster_arn, summary.hyperpod_nodes, namespaces)
        summary.cluster_mode, summary.cluster_mode_why = mode.name, mode.why
        summary.warnings.extend(mode.warnings)
        if mode.hyperpod and work.ec2_nodes:
            work.skips[Skip.HYPERPOD_MODE] += len(work.ec2_nodes)
            work.ec2_nodes = []
        return mode

    def _learn_topology(self, work: _Pass) -> None:
        """Adopt the answers EKS's labels give, then ask EC2 only for what is not known: instances
        never seen, named by an event, with a stale answer, or whose adopted labels changed."""
        options, snapshot = work.options, work.snapshot
        forced = set(options.targeted_instance_ids or ())
        now = self._wall()
        forced |= self._adopt(work, now, frozenset(forced))
        ask = instances_to_ask(
            (i for _, i in work.ec2_nodes),
            snapshot,
            now,
            options.refresh_after_s,
            forced,
            verify_after_s=options.verify_after_s,
        )
        if not ask:
            return
        fleet = {iid: view.instance_type for view, iid in work.ec2_nodes}
        outcome = self._ec2.describe(ask, options.deadline, fleet)
        self._record_answers(work, outcome)

    def _adopt(self, work: _Pass, now: float, forced: frozenset[str]) -> set[str]:
        """Take a node's complete layer labels (EKS writes them from EC2) as its instance's answer
        when the snapshot has none: no EC2 call, and nothing to write. Returns the label-backed
        instances whose labels no longer match their answer: EC2 settles those (EC2 is the truth).
        An instance an event names is never adopted: a stop/start moves it, its labels may be old."""
        snapshot, recheck = work.snapshot, set()
        for view, iid in work.ec2_nodes:
            if iid in forced:
                continue
            known = snapshot.instances.get(iid)
            if known is None and iid not in snapshot.absent:
                topo = adopted_topology(
                    iid,
                    view.labels,
                    instance_type=view.instance_type,
                    availability_zone=view.ref.availability_zone,
                    at=now,
                )
                if topo is not None:
                    snapshot.instances[iid] = topo
                    work.summary.adopted += 1
            elif known is not None and known.adopted and label_patch(view.labels, known):
                recheck.add(iid)
        return recheck

    def _record_answers(self, work: _Pass, outcome: DescribeOutcome) -> None:
        """What EC2 said, into the snapshot: an answer (an adopted one confirmed stays label-backed,
        verified now), or the instance's absence."""
        summary, snapshot = work.summary, work.snapshot
        summary.ec2_calls = outcome.calls
        summary.ec2_retries = outcome.retries
        summary.ec2_error = outcome.error
        summary.ec2_instances_asked = len(outcome.asked)
        now = self._wall()
        for iid in outcome.asked:
            previous = snapshot.instances.get(iid)
            if previous is not None and previous.adopted:
                summary.verified += 1
            if iid in outcome.answers:
                answer = outcome.answers[iid]
                if (
                    previous is not None
                    and previous.adopted
                    and previous.network_nodes == answer.network_nodes
                ):
                    answer = replace(answer, adopted_at=previous.adopted_at)
                snapshot.instances[iid] = answer
                snapshot.absent.pop(iid, None)
            else:
                snapshot.instances.pop(iid, None)
                snapshot.absent[iid] = now
                summary.ec2_missing.append(iid)
        if outcome.unasked:
            summary.complete = False

    def _label_nodes(self, work: _Pass) -> None:
        """Patch only the nodes whose labels differ from their answer."""
        summary, skips = work.summary, work.skips
        todo = self._patches(work)
        for view, patch, result in self._patch_all(todo, work.options.deadline):
            if result is None:  # the time budget ran out before its turn
                skips[Skip.PENDING] += 1
                summary.complete = False
            elif result.outcome == "patched":
                summary.patched += 1
                work.final_labels[view.name] = apply_patch(view.labels, patch)
            elif result.outcome == "gone":
                skips[Skip.NODE_GONE] += 1
                work.gone.add(view.name)
            else:
                summary.failed += 1
                summary.complete = False
                summary.failures.append(
                    {"node": view.name, "status": result.status, "message": result.message}
                )

    def _patches(self, work: _Pass) -> list[tuple[NodeView, LabelPatch]]:
        summary, skips, snapshot = work.summary, work.skips, work.snapshot
        todo: list[tuple[NodeView, LabelPatch]] = []
        for view, iid in work.ec2_nodes:
            work.final_labels[view.name] = view.labels
            topo = snapshot.instances.get(iid)
            if topo is None:
                if iid not in snapshot.absent:
                    skips[Skip.PENDING] += 1
                    continue
                skips[Skip.NOT_IN_EC2_ANSWER] += 1
                # EC2 has no network nodes for it: a layer label on it (set by hand, or left from an
                # earlier answer) would mislead Kueue's placement, so it goes.
                patch = stale_layer_patch(view.labels)
                if not patch:
                    continue
            else:
                summary.with_topology += 1
                patch = label_patch(view.labels, topo)
                if not patch:
                    summary.unchanged += 1
                    continue
            todo.append((view, patch))
        return todo

    def _refresh_snapshot(self, work: _Pass) -> None:
        """Per-node capacity on the labels the nodes now carry; on a full pass only live instances
        stay, and the placement quality is computed from the pods listed."""
        options, snapshot, summary = work.options, work.snapshot, work.summary
        full = options.targeted_instance_ids is None
        requested: dict[str, Resources] = {}
        if options.collect_requested and full:
            try:
                requested, work.pods = self._nodes.scan_pods()
                snapshot.pod_defaults = self._nodes.pod_defaults()
            except KubernetesError as exc:
                summary.failures.append({"node": None, "status": exc.status, "message": str(exc)})
        node_capacity = {
            v.name: NodeCapacity.from_labels(
                v.name,
                work.final_labels.get(v.name, v.labels),
                instance_type=v.instance_type,
                instance_id=v.ref.instance_id,
                allocatable=v.allocatable,
                requested=requested.get(v.name)
                or (snapshot.nodes[v.name].requested if v.name in snapshot.nodes else Resources()),
                available=v.available,
            )
            for v in work.views
            if v.name not in work.gone
        }
        if not full:
            snapshot.nodes.update(node_capacity)
            return
        snapshot.nodes = node_capacity
        live = {iid for _, iid in work.ec2_nodes}
        snapshot.instances = {i: t for i, t in snapshot.instances.items() if i in live}
        snapshot.absent = {i: t for i, t in snapshot.absent.items() if i in live}
        if work.pods is not None:
            from topogov.domain.fleet_map import running_jobs
            from topogov.domain.placement_quality import quality

            snapshot.placement = quality(work.pods, snapshot.nodes, self._team_of)
            snapshot.running = running_jobs(work.pods)

    def _save_if_changed(self, work: _Pass, before: tuple[Any, ...]) -> None:
        """Written only when its content changed: no write without drift, here as on the nodes."""
        snapshot, summary = work.snapshot, work.summary
        current = (
            snapshot.instances, snapshot.absent, snapshot.nodes, snapshot.placement, snapshot.running,
            snapshot.mode, snapshot.pod_defaults,
        )  # fmt: skip
        if current == before and snapshot.generated_at:
            return
        snapshot.generated_at = self._wall()
        from topogov.domain.capacity import capacity_record

        # made once per written snapshot, here, rather than by the API once per snapshot and warm
        # instance: about 0.25 s of CPU at 10,000 nodes (docs/benchmarks.md, the dashboard)
        snapshot.capacity = capacity_record(snapshot.nodes)
        try:
            self._store.save(snapshot)
            summary.snapshot_written = True
        except SnapshotError as exc:
            summary.snapshot_error = str(exc)
            summary.complete = False

    def _patch_all(
        self, todo: list[tuple[NodeView, LabelPatch]], deadline: float
    ) -> Iterator[tuple[NodeView, LabelPatch, PatchOutcomeLike | None]]:
        """Each node's PATCH, ``patch_concurrency`` in flight at once (a first pass of a large
        fleet is one PATCH per node, each a round trip to the API server); None for a node whose
        turn came after ``deadline``. In the order of ``todo``."""

        def one(item: tuple[NodeView, LabelPatch]) -> PatchOutcomeLike | None:
            if self._clock() > deadline:
                return None
            return self._nodes.patch_labels(item[0].name, item[1])

        if self._patch_concurrency == 1 or len(todo) < 2:
            results: Iterable[PatchOutcomeLike | None] = map(one, todo)
        else:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(max_workers=min(self._patch_concurrency, len(todo))) as pool:
                results = list(pool.map(one, todo))
        for (view, patch), result in zip(todo, results, strict=True):
            yield view, patch, result

    def _load_snapshot(self, summary: PassSummary) -> Snapshot:
        try:
            return self._store.load() or Snapshot()
        except SnapshotError as exc:
            summary.snapshot_error = str(exc)
            return Snapshot()

    def _targeted_views(
        self, instance_ids: Iterable[str], snapshot: Snapshot
    ) -> tuple[list[NodeView], set[str]]:
        """The nodes of the named instances (one GET each when the snapshot knows the node), and
        the ids with no node yet: the next full pass picks those up."""
        views: list[NodeView] = []
        missing: list[str] = []
        wanted: set[str] = set()
        for iid in instance_ids:
            name = snapshot.node_for_instance(iid)
            node = self._nodes.get_node(name) if name else None
            if node is not None and node.ref.instance_id == iid:
                views.append(node)
            else:
                missing.append(iid)
        if missing:
            # Not in the snapshot (new instance): one list finds it if it has registered.
            wanted = set(missing)
            for view in self._nodes.list_nodes():
                if view.ref.instance_id in wanted:
                    views.append(view)
                    wanted.discard(view.ref.instance_id)
        return views, wanted
