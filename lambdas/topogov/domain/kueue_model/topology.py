"""One TAS flavor's topology tree with free capacity and usage: Kueue v0.17.0's ``TASFlavorSnapshot``
(``pkg/cache/scheduler/tas_flavor_snapshot.go``) built as ``TASFlavorCache.snapshot`` builds it
(``pkg/cache/scheduler/tas_flavor.go``).

Which nodes are in the tree
    A node is when it is ``Ready`` and not ``spec.unschedulable`` (``tas_nodes_cache.go``,
    ``nodesCache.sync``) and matches the flavor: every ``nodeLabels`` pair, and a label for every
    Topology level (``pkg/util/tas/node.go``, ``NodeMatchesFlavor``).

Leaves
    With ``kubernetes.io/hostname`` the lowest level, a leaf is a host, keyed by its hostname label
    (``addNode``); otherwise a leaf is a lowest-level domain keyed by its level values joined with
    ``,`` (``utiltas.DomainID``), and nodes sharing it add up. Domains above are made from the leaves'
    value prefixes (``initialize``). Nodes sharing a hostname (upstream's TAS performance test gives
    every rack ``node-0`` … ``node-63``) add up too, into a leaf filed under the levels of the first
    of them: here the first by node name; in Kueue the first its node cache's map yields, an order Go
    randomises (``nodesCache.find``), so there the leaf's rack may differ from one snapshot to the next.

Capacity
    A leaf's free capacity is its nodes' ``status.allocatable`` minus what non-TAS pods on them
    request, each such pod also taking one ``pods`` (``addCapacity``, ``addNonTASUsage``). TAS usage
    (``tasUsage``) is what admitted workloads were *assigned*: per domain, the single-pod requests times
    the count, plus ``count`` pods (``updateTASUsage``); usage on a domain not in the tree (a node gone
    or NotReady) is dropped (``addTASUsage``).

For speed at 10,000 nodes a leaf's (free, usage) pair is interned as a *class*: leaves of one class
hold the same number of any pod, so a placement computes one count per class, not per leaf.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from topogov.domain.kueue_model.objects import HOSTNAME, PODS, Node, NonTASPod, ResourceFlavor, Topology
from topogov.domain.kueue_model.resources import count_in


def node_matches_flavor(node: Node, node_labels: Mapping[str, str], levels: Sequence[str]) -> bool:
    """``utiltas.NodeMatchesFlavor``: every flavor label equal, every level label present."""
    labels = node.labels
    return all(labels.get(k) == v for k, v in node_labels.items()) and all(lv in labels for lv in levels)


def node_in_cache(node: Node) -> bool:
    """``nodesCache.sync``: only Ready, schedulable nodes are cached for TAS."""
    return node.ready and not node.unschedulable


@dataclass(frozen=True, slots=True)
class DomainUsage:
    """``workload.TopologyDomainRequests``: ``count`` pods of ``single`` on the domain ``values``."""

    values: tuple[str, ...]
    single: Mapping[str, int]
    count: int


class FlavorTree:
    """The tree, capacity and usage of one TAS flavor. Domains of each level are kept sorted by their
    level values, so a domain's index is its rank in Kueue's last tie-break (``sortedDomains``:
    ``slices.Compare(a.levelValues, b.levelValues)``)."""

    def __init__(
        self,
        flavor: ResourceFlavor,
        topology: Topology,
        nodes: Iterable[Node],
        non_tas_pods: Iterable[NonTASPod] = (),
    ) -> None:
        """One piece on purpose: ``newTASFlavorSnapshot`` and its ``addNode`` / ``initialize`` steps
        (tas_flavor_snapshot.go) in upstream's order, the tree built once per flavor."""
        self.flavor = flavor.name
        self.topology_name = topology.name
        self.levels: tuple[str, ...] = topology.levels
        self.lowest_is_host = bool(self.levels) and self.levels[-1] == HOSTNAME
        self.tolerations = flavor.tolerations
        depth = len(self.levels)
        leaf_values: dict[str, tuple[str, ...]] = {}
        leaf_node: dict[str, Node] = {}
        leaf_free: dict[str, dict[str, int]] = {}
        node_leaf: dict[str, str] = {}
        for node in sorted(nodes, key=lambda n: n.name):
            if not node_in_cache(node) or not node_matches_flavor(node, flavor.node_labels, self.levels):
                continue
            values = tuple(node.labels[k] for k in self.levels)
            leaf_id = node.labels[HOSTNAME] if self.lowest_is_host else ",".join(values)
            if leaf_id not in leaf_values:
                leaf_values[leaf_id] = values
                leaf_node[leaf_id] = node
                leaf_free[leaf_id] = {}
            free = leaf_free[leaf_id]
            for name, value in node.allocatable.items():
                free[name] = free.get(name, 0) + value
            node_leaf[node.name] = leaf_id
        for pod in non_tas_pods:
            leaf_id = node_leaf.get(pod.node, "")
            if leaf_id:
                free = leaf_free[leaf_id]
                for name, value in {**pod.requests, PODS: pod.requests.get(PODS, 0) + 1}.items():
                    free[name] = free.get(name, 0) - value
        # levels: domains sorted by their values (leaves' values are unique: a hostname or a DomainID)
        self.leaf_ids: list[str] = sorted(leaf_values, key=lambda lid: leaf_values[lid])
        self.values: list[list[tuple[str, ...]]] = [
            sorted({v[: lvl + 1] for v in leaf_values.values()}) for lvl in range(depth - 1)
        ]
        if depth:
            self.values.append([leaf_values[lid] for lid in self.leaf_ids])
        index = [{v: i for i, v in enumerate(level)} for level in self.values]
        self.parent: list[list[int]] = [[0] * len(level) for level in self.values]
        self.children: list[list[list[int]]] = [[[] for _ in level] for level in self.values]
        self.leaf_index = {lid: i for i, lid in enumerate(self.leaf_ids)}
        self.leaf_nodes: list[Node] = [leaf_node[lid] for lid in self.leaf_ids]
        for lvl in range(1, depth):
            for i, v in enumerate(self.values[lvl]):
                p = index[lvl - 1][v[:lvl]]
                self.parent[lvl][i] = p
                self.children[lvl - 1][p].append(i)
        self.tainted = [i for i, n in enumerate(self.leaf_nodes) if n.taints] if self.lowest_is_host else []
        # capacity classes
        self._free: list[dict[str, int]] = [leaf_free[lid] for lid in self.leaf_ids]
        self._free_key = [tuple(sorted(free.items())) for free in self._free]  # interning's half
        self._used: dict[int, dict[str, int]] = {}
        self._class_ids: dict[tuple[tuple[tuple[str, int], ...], tuple[tuple[str, int], ...]], int] = {}
        self.class_remaining: list[dict[str, int]] = []
        self.leaf_class: list[int] = []
        self.leaf_empty_class: list[int] = []
        for i in range(len(self.leaf_ids)):
            self.leaf_empty_class.append(self._intern(i, {}))
        self.leaf_class = list(self.leaf_empty_class)
        # a usage change's outcome, by (the leaf's capacity, the usage dict it held, the change): the
        # new dict and class, the same objects for every leaf that makes the same change (shared by
        # copies, as the class table; each entry holds the old dict, so its id is not reused)
        self._steps: dict[tuple[Any, ...], tuple[dict[str, int] | None, dict[str, int] | None, int]] = {}
        self._unselected: dict[frozenset[tuple[str, str]], tuple[int, ...]] = {}
        # the leaves whose usage changed, in order, from the absolute position ``changed_base``: what
        # was counted from the usage (tas.Counts) catches up from it instead of counting afresh
        self.changed: list[int] = []
        self.changed_base = 0
        self.memo: dict[Any, Any] = {}  # per question: answers read-only to their users
        self.reads = 0  # how many times a placement read the usage (scheduler.Nominations)

    def unselected(self, selector: Mapping[str, str]) -> tuple[int, ...]:
        """The leaves (hosts) whose labels ``selector`` does not match, computed once per selector
        (a node's labels never change in a tree's life: a node change builds new trees)."""
        key = frozenset(selector.items())
        out = self._unselected.get(key)
        if out is None:
            out = self._unselected[key] = tuple(
                i for i, node in enumerate(self.leaf_nodes) if any(node.labels.get(k) != v for k, v in key)
            )
        return out

    # -- usage -------------------------------------------------------------------------------------
    def _intern(self, leaf: int, used: Mapping[str, int]) -> int:
        """The class of leaf ``leaf`` holding ``used``: its free capacity and usage, numbered."""
        key = (self._free_key[leaf], tuple(sorted((k, v) for k, v in used.items() if v)))
        cid = self._class_ids.get(key)
        if cid is None:
            remaining = dict(self._free[leaf])
            for name, value in used.items():  # Go's Requests.Sub adds missing keys, negative
                remaining[name] = remaining.get(name, 0) - value
            cid = self._class_ids[key] = len(self.class_remaining)
            self.class_remaining.append(remaining)
        return cid

    def leaf_of(self, values: Sequence[str]) -> int | None:
        """The leaf of an assignment domain (``utiltas.DomainID(values)``), None if not in the tree."""
        return self.leaf_index.get(",".join(values))

    def change_usage(self, usage: Iterable[DomainUsage], sign: int) -> None:
        """Add (``sign`` 1) or remove (-1) TAS usage: ``updateTASUsage`` of each domain."""
        changed = self.changed
        for u in usage:
            i = self.leaf_of(u.values)
            if i is None:
                continue  # "skip accounting for TAS usage in domain"
            changed.append(i)
            held = self._used.get(i)
            key = (self.leaf_empty_class[i], id(held), tuple(u.single.items()), u.count, sign)
            step = self._steps.get(key)
            if step is None:
                used = dict(held or ())  # a new dict: a copy of the tree may share the old
                for name, value in u.single.items():
                    used[name] = used.get(name, 0) + sign * value * u.count
                used[PODS] = used.get(PODS, 0) + sign * u.count
                if len(self._steps) > 65536:
                    self._steps.clear()
                if any(used.values()):
                    step = self._steps[key] = (held, used, self._intern(i, used))
                else:
                    step = self._steps[key] = (held, None, self.leaf_empty_class[i])
            if step[1] is None:
                self._used.pop(i, None)
            else:
                self._used[i] = step[1]
            self.leaf_class[i] = step[2]
        if len(changed) > 4 * len(self.leaf_ids) + 1024:  # what is that far behind counts afresh
            self.changed_base += len(changed)
            self.changed = []

    def copy(self) -> FlavorTree:
        """A tree with this one's usage, to change on its own: nodes, structure and capacity classes
        are shared (the class table only grows, and a class is its content), the usage and what was
        counted from it are copied."""
        other = copy.copy(self)
        other.leaf_class = list(self.leaf_class)
        other._used = dict(self._used)  # change_usage replaces a leaf's dict, never changes it
        other.changed, other.changed_base = [], self.position
        # what was counted for a question, copied (what a copy rebuilds itself answers None)
        other.memo = {
            key: kept for key, counts in self.memo.items() if (kept := counts.copy(other)) is not None
        }
        return other

    @property
    def position(self) -> int:
        """How many leaf changes the usage has seen (counts synced there are up to date)."""
        return self.changed_base + len(self.changed)

    def remaining(self, leaf: int, *, simulate_empty: bool = False) -> dict[str, int]:
        """Free capacity minus TAS usage (minus nothing when simulating an empty flavor)."""
        cls = self.leaf_empty_class[leaf] if simulate_empty else self.leaf_class[leaf]
        return dict(self.class_remaining[cls])

    def fits(self, usage: Iterable[DomainUsage]) -> bool:
        """``TASFlavorSnapshot.Fits``: every domain of the usage still holds its pods (each checked on
        its own, with the single-pod requests only, no ``pods``)."""
        self.reads += 1
        for u in usage:
            i = self.leaf_of(u.values)
            if i is None:
                return False
            if count_in(u.single, self.class_remaining[self.leaf_class[i]])[0] < u.count:
                return False
        return True

    def usage_by_leaf(self) -> dict[str, dict[str, int]]:
        """TAS usage per leaf id (for tests and invariants)."""
        return {self.leaf_ids[i]: dict(u) for i, u in self._used.items()}

    def free_by_leaf(self) -> dict[str, dict[str, int]]:
        return {lid: dict(self._free[i]) for i, lid in enumerate(self.leaf_ids)}
