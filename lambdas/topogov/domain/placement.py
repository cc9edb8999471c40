"""Where a job's pods can go: topology levels, per-domain pod capacity, feasibility (pure).

A job is ``count`` identical pods, each requesting ``pod`` resources, optionally restricted to an
instance type. A domain of a level (a network node of layer N, or one host) holds a pod on a node
when every requested resource fits in what the node has: ``allocatable`` ("can it ever fit") or
``allocatable - requested`` ("does it fit now"). A domain holds as many pods as its nodes do, summed.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from topogov.domain.labels import HOSTNAME_LABEL, layer_label, layer_of
from topogov.domain.quantity import Resources
from topogov.domain.tree import NodeCapacity

MAX_LAYERS = 4
ALIASES = {f"layer-{i}": layer_label(i) for i in range(1, MAX_LAYERS + 1)} | {"hostname": HOSTNAME_LABEL}


class UnknownLevel(ValueError):
    pass


def resolve_level(value: str) -> str:
    """``layer-3`` / ``hostname`` / a full label key -> the label key Kueue reads."""
    if value in ALIASES:
        return ALIASES[value]
    if value == HOSTNAME_LABEL or ((n := layer_of(value)) is not None and n <= MAX_LAYERS):
        return value
    known = ", ".join([*ALIASES, *ALIASES.values()])
    raise UnknownLevel(f"unknown topology level {value!r}; known: {known}")


def level_name(label: str) -> str:
    for alias, key in ALIASES.items():
        if key == label:
            return alias
    return label


def pods_fit(have: Resources, pod: Resources) -> int:
    """How many ``pod``s fit in ``have``."""
    fits = math.inf
    for need, got in (
        (pod.gpu, have.gpu),
        (pod.efa, have.efa),
        (pod.cpu_m, have.cpu_m),
        (pod.memory, have.memory),
    ):
        if need > 0:
            fits = min(fits, max(0, got) // need)
    return int(fits) if fits != math.inf else 1_000_000  # a pod that requests nothing fits anywhere


@dataclass(frozen=True, slots=True)
class DomainFit:
    level: str  # label key
    domain: str | None  # the domain holding the most pods (None: no node at that level)
    pods: int  # how many of the job's pods that domain holds
    nodes: int  # nodes in that domain
    flavor: str | None = None  # the GPU instance type (Kueue flavor) whose nodes those are


# A node class: nodes of one instance type with the same allocatable and requested resources hold
# the same number of any pod. A domain's "composition" is how many nodes of each class it has; a
# fleet has few classes and few distinct compositions per level, so a decision costs per
# composition, not per node or per domain: what keeps a dry run at 10,000 nodes within milliseconds.
ClassKey = tuple[str, Resources, Resources]
Composition = tuple[tuple[int, int], ...]  # ((class id, node count), ...)


@dataclass(frozen=True, slots=True)
class KueuePick:
    """Where Kueue would place a pod set now (the model's BestFit): its domain at the asked level, the
    nodes it would use, and how many nodes that domain has and how many of them have room."""

    instance_type: str
    domain: str
    nodes: tuple[str, ...]
    domain_nodes: int
    free_nodes: int


class CapacityIndex:
    """Per level, the distinct domain compositions (with the first domain of each). Built once per
    snapshot; queries never touch individual nodes.

    Domains are counted per flavor, as Kueue counts them: a pod set is given one flavor (a GPU
    instance type; :mod:`topogov.domain.kueue`), and that flavor's topology tree holds only its own
    nodes that carry every level of its Topology (kueue v0.17.0 ``pkg/util/tas/node.go``,
    ``NodeMatchesFlavor``). A level the flavor's Topology lacks is no level for it (Kueue skips the
    flavor: ``checkPodSetAndFlavorMatchForTAS``). Nodes of types that are no flavor (no GPU) are
    never placed on: every ClusterQueue lists GPU flavors only.
    """

    def __init__(self, nodes: Iterable[NodeCapacity]) -> None:
        from topogov.domain.kueue import flavors_from_nodes

        nodes = list(nodes)
        self._by_name: dict[str, NodeCapacity] = {n.name: n for n in nodes}
        self._trees: dict[str, Any] = {}  # instance type -> the Kueue model's flavor tree (lazily)
        self.flavors = {f.instance_type: f for f in flavors_from_nodes(nodes)}
        self.node_count = 0
        self.classes: list[ClassKey] = []
        self._ids: dict[ClassKey, int] = {}
        hosts: list[tuple[str, int]] = []  # per class: (its first node, how many)
        # label -> domain -> {class id: nodes}
        self._domains: dict[str, dict[str, dict[int, int]]] = defaultdict(dict)
        for node in nodes:
            depth = self._flavor_depth(node)
            if depth is None:
                continue
            cid, new = self._class_id(node)
            if new:
                hosts.append((node.name, 0))
            first, n = hosts[cid]
            hosts[cid] = (min(first, node.name), n + 1)
            for layer, domain in enumerate(node.path[:depth], start=1):
                counts = self._domains[layer_label(layer)].setdefault(domain, {})
                counts[cid] = counts.get(cid, 0) + 1
        self.depth = max((f.depth for f in self.flavors.values()), default=0)
        self._hosts: list[tuple[str, int]] | None = hosts
        by_level: dict[str, list[tuple[Composition, str]]] = {}  # level -> [(composition, its first domain)]
        for label, per_domain in self._domains.items():
            firsts: dict[Composition, str] = {}
            for domain, counts in per_domain.items():
                comp = tuple(sorted(counts.items()))
                if comp not in firsts or domain < firsts[comp]:
                    firsts[comp] = domain
            by_level[label] = list(firsts.items())
        self._by_level: dict[str, list[tuple[Composition, str]]] | None = by_level
        # what update() keeps, made by its first call (a snapshot's index is never updated)
        self._live = False
        self._member: dict[str, int] = {}  # node -> its class, for the nodes of a flavor's tree
        self._class_nodes: list[set[str]] = []  # per class: its nodes
        self._comps: dict[str, dict[Composition, set[str]]] = defaultdict(dict)  # label -> comp -> domains
        self._firsts: dict[str, dict[Composition, str]] = defaultdict(dict)  # label -> comp -> first domain

    @property
    def _nodes(self) -> list[NodeCapacity]:
        return list(self._by_name.values())

    def nodes_of(self, instance_type: str) -> list[NodeCapacity]:
        """The nodes of one instance type (a flavor's, before its Topology's depth is checked)."""
        return [n for n in self._by_name.values() if n.instance_type == instance_type]

    def _flavor_depth(self, node: NodeCapacity) -> int | None:
        flavor = self.flavors.get(node.instance_type)
        if flavor is None or len(node.path) < flavor.depth:
            return None  # not in any flavor's topology tree
        return flavor.depth

    def _class_id(self, node: NodeCapacity) -> tuple[int, bool]:
        """Count ``node`` in the index: its class's id, and whether the class is new."""
        self.node_count += 1
        key: ClassKey = (node.instance_type, node.allocatable, node.used)
        cid = self._ids.get(key)
        if cid is not None:
            return cid, False
        cid = self._ids[key] = len(self.classes)
        self.classes.append(key)
        return cid, True

    def _make_live(self) -> None:
        """The per-node and per-composition books :meth:`update` keeps."""
        self._class_nodes = [set() for _ in self.classes]
        for node in self._by_name.values():
            if self._flavor_depth(node) is not None:
                cid = self._ids[(node.instance_type, node.allocatable, node.used)]
                self._member[node.name] = cid
                self._class_nodes[cid].add(node.name)
        for label, per_domain in self._domains.items():
            comps, firsts = self._comps[label], self._firsts[label]
            for domain, counts in per_domain.items():
                comp = tuple(sorted(counts.items()))
                comps.setdefault(comp, set()).add(domain)
                if comp not in firsts or domain < firsts[comp]:
                    firsts[comp] = domain
        self._live = True

    def _add(self, node: NodeCapacity) -> None:
        depth = self._flavor_depth(node)
        if depth is None:
            return
        cid, new = self._class_id(node)
        if new:
            self._class_nodes.append(set())
        self._class_nodes[cid].add(node.name)
        self._member[node.name] = cid
        self._hosts = None
        for layer, domain in enumerate(node.path[:depth], start=1):
            self._move(layer_label(layer), domain, cid, 1)

    def _remove(self, node: NodeCapacity) -> None:
        cid = self._member.pop(node.name, None)
        if cid is None:
            return
        self.node_count -= 1
        self._class_nodes[cid].discard(node.name)
        self._hosts = None
        depth = self._flavor_depth(node)
        assert depth is not None
        for layer, domain in enumerate(node.path[:depth], start=1):
            self._move(layer_label(layer), domain, cid, -1)

    def _move(self, label: str, domain: str, cid: int, delta: int) -> None:
        """One node of class ``cid`` into (+1) or out of (-1) ``domain``: its composition changes."""
        counts = self._domains[label].setdefault(domain, {})
        comps, firsts = self._comps[label], self._firsts[label]
        if counts:
            old = tuple(sorted(counts.items()))
            members = comps[old]
            members.discard(domain)
            if not members:
                del comps[old], firsts[old]
            elif firsts[old] == domain:
                firsts[old] = min(members)
        n = counts.get(cid, 0) + delta
        if n:
            counts[cid] = n
        else:
            counts.pop(cid, None)
        if counts:
            comp = tuple(sorted(counts.items()))
            comps.setdefault(comp, set()).add(domain)
            if comp not in firsts or domain < firsts[comp]:
                firsts[comp] = domain
        self._by_level = None

    def update(self, node: NodeCapacity) -> None:
        """Replace the node of that name (its requests, availability or allocatable changed; not its
        type or place): the index then answers as ``CapacityIndex`` of the new nodes would (the
        simulator keeps one so, rather than building one per decision)."""
        old = self._by_name.get(node.name)
        if old is None or (old.instance_type, old.path) != (node.instance_type, node.path):
            raise ValueError(f"update: {node.name} is not in the index with that type and path")
        if not self._live:
            self._make_live()
        self._remove(old)
        self._by_name[node.name] = node
        self._add(node)
        self._trees.pop(node.instance_type, None)

    @property
    def hosts(self) -> list[tuple[str, int]]:
        """Per class: (its first node, how many); ``("", 0)`` for a class no node has any more."""
        if self._hosts is None:
            self._hosts = [(min(names), len(names)) if names else ("", 0) for names in self._class_nodes]
        return self._hosts

    @property
    def by_level(self) -> dict[str, list[tuple[Composition, str]]]:
        """Level -> [(composition, the first domain with it)]."""
        if self._by_level is None:
            self._by_level = {label: list(firsts.items()) for label, firsts in self._firsts.items() if firsts}
        return self._by_level

    def kueue_pick(
        self,
        level: str,
        per_pod: Resources,
        pods: int,
        instance_type: str | None,
        slices: tuple[str, int] | None = None,
    ) -> KueuePick | None:
        """Where Kueue v0.17's BestFit would put ``pods`` pods requiring one domain of ``level`` now
        (``slices``: every ``size`` consecutive pods in one domain of a slice level too), per the model
        (``kueue_model.find_assignment``) on the snapshot's nodes, flavor by flavor in the order the
        ClusterQueues list them; None when no flavor has room now."""
        from topogov.domain.kueue_model import TASRequest, TopologyRequest, find_assignment, requests_from

        types = [instance_type] if instance_type else sorted(self.flavors)
        for itype in types:
            flavor = self.flavors.get(itype or "")
            if flavor is None or level not in flavor.levels or (slices and slices[0] not in flavor.levels):
                continue
            tree = self._flavor_tree(flavor.instance_type)
            asked = TopologyRequest(required=level)
            if slices is not None:
                asked = TopologyRequest(required=level, slice_level=slices[0], slice_size=slices[1])
            request = TASRequest("main", pods, requests_from(per_pod), asked)
            placed = find_assignment(tree, request).assignment
            if placed is None:
                continue
            hosts = tuple(sorted({values[-1] for values, count in placed.domains if count}))
            if not hosts:
                continue
            depth = flavor.levels.index(level) + 1
            by_name = {n.name: n for n in self._nodes}
            if depth > flavor.depth:  # the hostname level: the domain is the node
                domain, inside = hosts[0], [by_name[hosts[0]]]
            else:
                domain = by_name[hosts[0]].path[depth - 1]
                inside = [
                    n for n in self._nodes
                    if n.instance_type == flavor.instance_type and n.path[depth - 1 : depth] == (domain,)
                ]  # fmt: skip
            room = sum(1 for n in inside if _fits(n, per_pod))
            return KueuePick(flavor.instance_type, domain, hosts, len(inside), room)
        return None

    def _flavor_tree(self, instance_type: str) -> Any:
        """The Kueue model's tree of one flavor's nodes (made once per index and flavor)."""
        from topogov.domain.kueue import topology_levels, topology_name
        from topogov.domain.kueue_model import FlavorTree, ResourceFlavor, Topology
        from topogov.domain.kueue_model.convert import nodes_of
        from topogov.domain.labels import INSTANCE_TYPE_LABEL

        tree = self._trees.get(instance_type)
        if tree is None:
            flavor = self.flavors[instance_type]
            model_nodes, busy = nodes_of(self.nodes_of(instance_type))
            topo = Topology(topology_name(flavor.depth), tuple(topology_levels(flavor.depth)))
            rf = ResourceFlavor(instance_type, {INSTANCE_TYPE_LABEL: instance_type}, topo.name)
            tree = self._trees[instance_type] = FlavorTree(rf, topo, model_nodes, busy)
        return tree

    def eligible(self, instance_type: str | None = None) -> list[str]:
        """The flavors a job may get: the one of its instance type, or every flavor."""
        if instance_type is not None:
            return [instance_type] if instance_type in self.flavors else []
        return sorted(self.flavors)

    def flavor_levels(self, instance_type: str) -> list[str]:
        """The levels of a flavor's Topology, coarsest first (as Kueue lists them)."""
        flavor = self.flavors.get(instance_type)
        return flavor.levels if flavor else []

    def has_level(self, label: str, instance_type: str | None = None) -> bool:
        return any(label in self.flavor_levels(t) for t in self.eligible(instance_type))

    def levels(self, instance_type: str | None = None) -> list[str]:
        """The levels a job may ask for, tightest first: hostname, layer-4 (if a flavor has it), ..."""
        depth = max((self.flavors[t].depth for t in self.eligible(instance_type)), default=0)
        return [HOSTNAME_LABEL, *(layer_label(i) for i in range(depth, 0, -1))]

    def _fits(self, pod: Resources, now: bool) -> list[int]:
        return [pods_fit(alloc - used if now else alloc, pod) for _, alloc, used in self.classes]

    def _group_fits(self, pod: Resources, leader: Resources, now: bool) -> list[tuple[int, int, int]]:
        """Per class, as Kueue counts a leaf for a pod-set group (kueue v0.17.0
        ``tas_flavor_snapshot.go``, ``fillInCounts``): the workers a node holds, whether it holds the
        leader, and the workers it holds beside the leader."""
        out = []
        for _, alloc, used in self.classes:
            have = alloc - used if now else alloc
            workers = pods_fit(have, pod)
            holds_leader = pods_fit(have, leader) > 0
            beside = pods_fit(have - leader, pod) if holds_leader else workers
            out.append((workers, int(holds_leader), beside))
        return out

    def best_domain(
        self,
        label: str,
        pod: Resources,
        *,
        now: bool,
        instance_type: str | None = None,
        leader: Resources | None = None,
    ) -> DomainFit:
        """The domain of ``label`` holding the most pods, over the flavors a job may get (a domain's
        pods are one flavor's: Kueue gives a pod set a single flavor). With a ``leader`` (a pod-set
        group: one leader pod and its workers), a domain holds the leader and the workers beside it,
        as Kueue counts them (``fillInCountsHelper``: the workers of all its nodes less the smallest
        loss the leader causes on one of them, when one of them holds the leader)."""
        if leader is not None:
            return self._best_group_domain(label, pod, leader, now=now, instance_type=instance_type)
        fits = self._fits(pod, now)
        best = DomainFit(label, None, 0, 0)
        for flavor in self.eligible(instance_type):
            if label not in self.flavor_levels(flavor):
                continue
            if label == HOSTNAME_LABEL:
                for cid, (name, count) in enumerate(self.hosts):
                    if not count or self.classes[cid][0] != flavor:
                        continue
                    if (
                        best.domain is None
                        or fits[cid] > best.pods
                        or (fits[cid] == best.pods and name < best.domain)
                    ):
                        best = DomainFit(label, name, fits[cid], 1, flavor)
                continue
            for comp, domain in self.by_level.get(label, ()):
                pods = nodes = 0
                for cid, n in comp:
                    if self.classes[cid][0] == flavor:
                        pods += n * fits[cid]
                        nodes += n
                if nodes and (
                    best.domain is None or pods > best.pods or (pods == best.pods and domain < best.domain)
                ):
                    best = DomainFit(label, domain, pods, nodes, flavor)
        return best

    def _best_group_domain(
        self, label: str, pod: Resources, leader: Resources, *, now: bool, instance_type: str | None
    ) -> DomainFit:
        """:meth:`best_domain` for a pod-set group: ``pods`` counts the leader (0 when no node of the
        domain holds it)."""
        fits = self._group_fits(pod, leader, now)
        best = DomainFit(label, None, 0, 0)

        def better(pods: int, domain: str) -> bool:
            return best.domain is None or pods > best.pods or (pods == best.pods and domain < best.domain)

        for flavor in self.eligible(instance_type):
            if label not in self.flavor_levels(flavor):
                continue
            if label == HOSTNAME_LABEL:
                for cid, (name, count) in enumerate(self.hosts):
                    workers, holds, beside = fits[cid]
                    pods = beside + 1 if holds else 0
                    if count and self.classes[cid][0] == flavor and better(pods, name):
                        best = DomainFit(label, name, pods, 1, flavor)
                continue
            for comp, domain in self.by_level.get(label, ()):
                state = nodes = holds = 0
                loss = None
                for cid, n in comp:
                    if self.classes[cid][0] != flavor:
                        continue
                    workers, held, beside = fits[cid]
                    state += n * workers
                    nodes += n
                    holds = max(holds, held)
                    loss = workers - beside if loss is None else min(loss, workers - beside)
                pods = state - (loss or 0) + 1 if holds else 0
                if nodes and better(pods, domain):
                    best = DomainFit(label, domain, pods, nodes, flavor)
        return best


@dataclass(frozen=True, slots=True)
class SlicePods:
    """How a level's domains hold pods of one kind per domain of a tighter slice level: Kueue counts a
    slice-level domain as ``pods // size`` slices, a domain above it as the sum of its children's
    (kueue v0.17.0 ``pkg/cache/scheduler/tas_flavor_snapshot.go``, ``fillInCountsHelper``'s
    ``sliceState``). ``children``: per domain of the level, the pods each of its slice-level domains
    holds (one flavor's nodes each)."""

    level: str
    slice_level: str
    children: dict[str, list[int]]

    @property
    def largest_slice_domain(self) -> int:
        """The pods the largest slice-level domain holds: no slice can be larger."""
        return max((p for pods in self.children.values() for p in pods), default=0)

    def best(self, size: int) -> tuple[str | None, int]:
        """The domain of the level holding the most slices of ``size`` pods, and how many."""
        best: tuple[str | None, int] = (None, 0)
        for domain in sorted(self.children):
            held = sum(p // size for p in self.children[domain])
            if best[0] is None or held > best[1]:
                best = (domain, held)
        return best


def slice_pods(
    index: CapacityIndex,
    level: str,
    slice_level: str,
    pod: Resources,
    *,
    now: bool,
    instance_type: str | None = None,
) -> SlicePods:
    """:class:`SlicePods` of ``level`` and ``slice_level`` over the flavors a job may get, node by node
    (a slice decision is rare: once per submission that asks for slices or that ``auto`` slices)."""
    per: dict[tuple[str, str], dict[str, int]] = {}
    for flavor in index.eligible(instance_type):
        levels = index.flavor_levels(flavor)
        if level not in levels or slice_level not in levels:
            continue
        depth = index.flavors[flavor].depth
        for node in index.nodes_of(flavor):
            if len(node.path) < depth:
                continue
            parent = node.name if level == HOSTNAME_LABEL else node.path[levels.index(level)]
            child = node.name if slice_level == HOSTNAME_LABEL else node.path[levels.index(slice_level)]
            fits = pods_fit(node.allocatable - node.used if now else node.allocatable, pod)
            counts = per.setdefault((flavor, parent), {})
            counts[child] = counts.get(child, 0) + fits
    children: dict[str, list[int]] = {}
    for (_, parent), counts in per.items():  # a domain's pods are one flavor's: the larger, if two share it
        pods = list(counts.values())
        if sum(pods) > sum(children.get(parent, [])):
            children[parent] = pods
    return SlicePods(level, slice_level, children)


def tighter_or_equal(index: CapacityIndex, inner: str, outer: str, instance_type: str | None = None) -> bool:
    """Is level ``inner`` tighter than or the same as ``outer`` (hostname is the tightest)?"""
    order = index.levels(instance_type)
    return inner in order and outer in order and order.index(inner) <= order.index(outer)


@dataclass(frozen=True, slots=True)
class LevelChoice:
    level: str | None  # None: no single domain of any level holds the job
    basis: str  # "free" (fits now), "allocatable" (fits once running work finishes) or "none"
    fit: DomainFit | None
    reason: str


def tightest_level(
    index: CapacityIndex,
    pod: Resources,
    count: int,
    *,
    instance_type: str | None = None,
    bases: Sequence[str] = ("free", "allocatable"),
    leader: Resources | None = None,
) -> LevelChoice:
    """The tightest level with a domain that holds all ``count`` pods (with a ``leader``: the leader
    and ``count - 1`` workers), trying each basis in turn: what ``auto`` picks, and what a refused
    ``required`` job is told would work."""
    for basis in bases:
        now = basis == "free"
        for label in index.levels(instance_type):
            fit = index.best_domain(label, pod, now=now, instance_type=instance_type, leader=leader)
            if fit.domain is not None and fit.pods >= count:
                what = "free capacity now" if now else "allocatable capacity (once running work finishes)"
                return LevelChoice(
                    label,
                    basis,
                    fit,
                    f"{level_name(label)} is the tightest level with a domain ({fit.domain}) that holds all "
                    f"{count} pods by {what}",
                )
    return LevelChoice(None, "none", None, f"no single domain of any level holds all {count} pods")


@dataclass(frozen=True, slots=True)
class Feasibility:
    feasible: bool
    fit: DomainFit  # the largest domain of the asked level, by allocatable
    would_fit: LevelChoice  # the tightest level that would hold the job, by allocatable
    level_known: bool = True  # False: no flavor the job may get has the level in its Topology


def required_feasibility(
    index: CapacityIndex,
    label: str,
    pod: Resources,
    count: int,
    *,
    instance_type: str | None = None,
    leader: Resources | None = None,
) -> Feasibility:
    """Can any domain of ``label`` ever hold all pods (by allocatable)? ``leader``: as
    :func:`tightest_level`."""
    fit = index.best_domain(label, pod, now=False, instance_type=instance_type, leader=leader)
    if fit.domain is not None and fit.pods >= count:
        return Feasibility(True, fit, LevelChoice(label, "allocatable", fit, ""))
    alt = tightest_level(
        index, pod, count, instance_type=instance_type, bases=("allocatable",), leader=leader
    )
    return Feasibility(False, fit, alt, index.has_level(label, instance_type))


def _fits(node: NodeCapacity, per_pod: Resources) -> bool:
    free = node.allocatable - node.used
    return (
        free.gpu >= per_pod.gpu
        and free.efa >= per_pod.efa
        and free.cpu_m >= per_pod.cpu_m
        and (free.memory >= per_pod.memory)
    )
