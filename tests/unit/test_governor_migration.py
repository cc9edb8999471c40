"""Moving a flavor to another Topology under Kueue's own rules (issue 11, item 1).

The stand-in below holds Kueue objects the way Kueue v0.17.0 and its CRDs treat them, and nothing
more:

* ``ResourceFlavor.spec.topologyName`` is immutable once set (CRD rule "topologyName is immutable when
  topologyName is set", ``config/components/crd/bases/kueue.x-k8s.io_resourceflavors.yaml``): a PUT
  that changes it is refused with 422 Invalid, as the API server refuses it;
* ResourceFlavors and Topologies carry the finalizer ``kueue.x-k8s.io/resource-in-use``; deleting one
  only marks it (``deletionTimestamp``) until Kueue's controller removes the finalizer, which it does
  for a flavor once no ClusterQueue lists it (``pkg/controller/core/resourceflavor_controller.go``,
  ``Reconcile``: ``ClusterQueuesUsingFlavor``) and for a Topology once no flavor refers to it
  (``pkg/controller/tas/topology_controller.go``). The controller reacts to events a little later:
  ``lag`` reads go by before it looks again.

The real Kueue judges the same path in the local stack's integration tests; this one pins the rules.
"""

from __future__ import annotations

import copy
from typing import Any

from topogov.domain.errors import KubernetesError
from topogov.domain.kueue import flavors_from_snapshot, render, topology_levels, topology_object
from topogov.domain.views.objects import ObjectView, object_view
from topogov.logic.governor import Action, Governor, format_plan, stamped

from .test_governor_render import sample_policy, sample_snapshot

FINALIZER = "kueue.x-k8s.io/resource-in-use"


class KueueStandIn:
    def __init__(self, lag: int = 0) -> None:
        self.objects: dict[tuple[str, str, str | None], dict[str, Any]] = {}
        self.lag = lag
        self._pending = 0
        self.writes: list[tuple[str, str, str]] = []
        self._rv = 0

    # -- Kueue's controllers ---------------------------------------------------------------------
    def _release(self) -> None:
        if self._pending > 0:
            self._pending -= 1
            return
        for key, obj in list(self.objects.items()):
            if not obj["metadata"].get("deletionTimestamp"):
                continue
            kind, name, _ = key
            if kind == "ResourceFlavor":
                used = any(name in _flavors(o) for k, o in self.objects.items() if k[0] == "ClusterQueue")
            elif kind == "Topology":
                used = any(
                    o["spec"].get("topologyName") == name
                    for k, o in self.objects.items()
                    if k[0] == "ResourceFlavor"
                )
            else:
                used = False
            if not used:
                del self.objects[key]

    def _event(self) -> None:
        self._pending = self.lag
        self._release()

    # -- the ObjectsPort ---------------------------------------------------------------------------
    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict | None:
        self._release()
        obj = self.objects.get((kind, name, namespace))
        return copy.deepcopy(obj) if obj else None

    def list(self, api_version: str, kind: str) -> list[dict]:
        self._release()
        return [copy.deepcopy(o) for k, o in sorted(self.objects.items(), key=str) if k[0] == kind]

    def create(self, obj: dict[str, Any]) -> dict:
        key = (obj["kind"], obj["metadata"]["name"], obj["metadata"].get("namespace"))
        if key in self.objects:
            raise KubernetesError(409, f"create {key}", "already exists")
        new = copy.deepcopy(dict(obj))
        self._rv += 1
        new["metadata"]["resourceVersion"] = str(self._rv)
        if obj["kind"] in ("ResourceFlavor", "Topology"):
            new["metadata"]["finalizers"] = [FINALIZER]
        self.objects[key] = new
        self.writes.append(("create", key[0], key[1]))
        self._event()
        return copy.deepcopy(new)

    def replace(self, obj: dict[str, Any]) -> dict | None:
        key = (obj["kind"], obj["metadata"]["name"], obj["metadata"].get("namespace"))
        old = self.objects.get(key)
        if old is None:
            raise KubernetesError(404, f"replace {key}", "not found")
        if obj["metadata"].get("resourceVersion") != old["metadata"]["resourceVersion"]:
            return None  # 409: the port answers None
        if key[0] == "ResourceFlavor" and "topologyName" in old["spec"]:  # noqa: SIM102 (the CRD rule, as written)
            if obj["spec"].get("topologyName") != old["spec"]["topologyName"]:
                raise KubernetesError(
                    422, f"replace {key}", "topologyName is immutable when topologyName is set"
                )
        new = copy.deepcopy(dict(obj))
        self._rv += 1
        new["metadata"]["resourceVersion"] = str(self._rv)
        new["metadata"]["finalizers"] = old["metadata"].get("finalizers", [])
        if old["metadata"].get("deletionTimestamp"):
            new["metadata"]["deletionTimestamp"] = old["metadata"]["deletionTimestamp"]
        self.objects[key] = new
        self.writes.append(("replace", key[0], key[1]))
        self._event()
        return copy.deepcopy(new)

    def merge_patch(self, api_version, kind, name, namespace, patch) -> dict:
        raise AssertionError("not used here")

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> bool:
        key = (kind, name, namespace)
        obj = self.objects.get(key)
        if obj is None:
            return False
        self.writes.append(("delete", kind, name))
        if obj["metadata"].get("finalizers"):
            obj["metadata"]["deletionTimestamp"] = "2026-12-01T00:00:00Z"
        else:
            del self.objects[key]
        self._event()
        return True

    def unfinished_jobs(self, namespace: str) -> list[str] | None:
        return []

    def apply(self, obj: dict[str, Any]) -> dict:
        """Server-side apply, as far as the team pod rules use it: labels and data merged in."""
        key = (obj["kind"], obj["metadata"]["name"], obj["metadata"].get("namespace"))
        old = self.objects.get(key)
        if old is None:
            return self.create(obj)
        new = copy.deepcopy(old)
        new["metadata"].setdefault("labels", {}).update(obj["metadata"].get("labels") or {})
        if "data" in obj:
            new["data"] = dict(obj["data"])
        return self.replace(new) or new


class AsViews:
    """The governor's port over the stand-in, as ``KubeObjects`` is over the API server: what it
    reads comes back as views of the stand-in's objects; writes pass the body through."""

    def __init__(self, kueue: KueueStandIn) -> None:
        self.kueue = kueue

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> ObjectView | None:
        obj = self.kueue.get(api_version, kind, name, namespace)
        return None if obj is None else object_view(obj)

    def list(self, api_version: str, kind: str) -> list[ObjectView]:
        return [object_view(o) for o in self.kueue.list(api_version, kind)]

    def create(self, obj: dict[str, Any]) -> ObjectView:
        return object_view(self.kueue.create(obj))

    def replace(self, obj: dict[str, Any]) -> ObjectView | None:
        new = self.kueue.replace(obj)
        return None if new is None else object_view(new)

    def merge_patch(self, api_version, kind, name, namespace, patch) -> ObjectView:
        return object_view(self.kueue.merge_patch(api_version, kind, name, namespace, patch))

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> bool:
        return self.kueue.delete(api_version, kind, name, namespace)

    def unfinished_jobs(self, namespace: str) -> list[str] | None:
        return self.kueue.unfinished_jobs(namespace)

    def list_in(self, api_version: str, kind: str, namespace: str) -> list[ObjectView]:
        return [v for v in self.list(api_version, kind) if v.namespace == namespace]

    def apply(self, obj: dict[str, Any], field_manager: str) -> ObjectView:
        return object_view(self.kueue.apply(obj))


def _flavors(cq: dict[str, Any]) -> set[str]:
    return {f["name"] for g in cq["spec"].get("resourceGroups") or [] for f in g["flavors"]}


def legacy(kueue: KueueStandIn, levels: int = 4) -> None:
    """The objects the governor wrote before per-depth Topologies: every flavor in one Topology."""
    for obj in render(sample_policy(), flavors_from_snapshot(sample_snapshot())):
        if obj["kind"] == "Topology":
            if ("Topology", "topogov-network", None) not in kueue.objects:
                topology = topology_object("topogov-network", topology_levels(levels), "v1beta1")
                kueue.create(stamped(object_view(topology)))
            continue
        if obj["kind"] == "ResourceFlavor":
            obj = copy.deepcopy(obj)
            obj["spec"]["topologyName"] = "topogov-network"
        kueue.create(obj if obj["kind"] == "Namespace" else stamped(object_view(obj)))
    kueue.writes.clear()


def test_kueue_keeps_a_flavor_a_queue_lists_so_deleting_it_first_never_ends() -> None:
    """The rule itself: a flavor still listed by a ClusterQueue is only marked for deletion."""
    kueue = KueueStandIn()
    legacy(kueue)
    kueue.delete("kueue.x-k8s.io/v1beta1", "ResourceFlavor", "p5.48xlarge")
    assert kueue.get("", "ResourceFlavor", "p5.48xlarge")["metadata"]["deletionTimestamp"]


def test_re_creation_goes_through_kueue_in_one_pass() -> None:
    kueue = KueueStandIn()
    legacy(kueue)
    governor = Governor(AsViews(kueue), sleep=lambda s: None)
    summary = governor.run(sample_policy(), sample_snapshot())
    assert summary.complete, summary.failures
    p5 = kueue.get("", "ResourceFlavor", "p5.48xlarge")
    assert p5["spec"]["topologyName"] == "topogov-3-layers" and not p5["metadata"].get("deletionTimestamp")
    assert kueue.get("", "ResourceFlavor", "p6-b200.48xlarge")["spec"]["topologyName"] == "topogov-network"
    for cq in kueue.list("", "ClusterQueue"):
        assert _flavors(cq) == {"p5.48xlarge", "p6-b200.48xlarge"}
    # the queues let go of the flavor before it was deleted, and took it back after it was created
    order = [w for w in kueue.writes if w[1] in ("ResourceFlavor", "ClusterQueue")]
    first_delete = order.index(("delete", "ResourceFlavor", "p5.48xlarge"))
    assert (
        all(w[0] == "replace" and w[1] == "ClusterQueue" for w in order[:first_delete]) and first_delete == 3
    )
    assert order[first_delete + 1] == ("create", "ResourceFlavor", "p5.48xlarge")
    assert governor.plan(sample_policy(), sample_snapshot()).changes == []


def test_a_slow_kueue_is_waited_for_over_passes_and_the_queues_never_hold_a_dying_flavor() -> None:
    kueue = KueueStandIn(lag=1000)  # Kueue does not let go within this pass
    legacy(kueue)
    governor = Governor(AsViews(kueue), sleep=lambda s: None, release_wait_s=2)
    first = governor.run(sample_policy(), sample_snapshot())
    assert first.complete, first.failures
    assert kueue.get("", "ResourceFlavor", "p5.48xlarge")["metadata"]["deletionTimestamp"]
    for cq in kueue.list("", "ClusterQueue"):
        assert _flavors(cq) == {"p6-b200.48xlarge"}, "a queue listing it would keep it forever"
    second = governor.plan(sample_policy(), sample_snapshot())
    assert [(c.action, c.kind, c.name) for c in second.changes] == [
        (Action.WAIT, "ResourceFlavor", "p5.48xlarge")
    ], format_plan(second)
    kueue.lag = kueue._pending = 0  # Kueue's controller catches up
    third = governor.run(sample_policy(), sample_snapshot())
    assert third.complete, third.failures
    assert [(c.action, c.kind) for c in third.plan.writes] == [
        (Action.CREATE, "ResourceFlavor"),
        (Action.UPDATE, "ClusterQueue"),
        (Action.UPDATE, "ClusterQueue"),
        (Action.UPDATE, "ClusterQueue"),
    ]
    assert kueue.get("", "ResourceFlavor", "p5.48xlarge")["spec"]["topologyName"] == "topogov-3-layers"
    assert governor.plan(sample_policy(), sample_snapshot()).changes == []


def test_a_queue_topogov_does_not_own_blocks_the_re_creation() -> None:
    kueue = KueueStandIn()
    legacy(kueue)
    foreign = copy.deepcopy(kueue.get("", "ClusterQueue", "hyperpod-ns-team-a-clusterqueue"))
    foreign["metadata"] = {"name": "someone-elses"}
    kueue.create(foreign)
    kueue.writes.clear()
    governor = Governor(AsViews(kueue), sleep=lambda s: None)
    plan = governor.plan(sample_policy(), sample_snapshot())
    (blocked,) = [c for c in plan.changes if c.action == Action.BLOCKED]
    assert blocked.name == "p5.48xlarge" and "someone-elses" in blocked.reason
    assert any("someone-elses" in w for w in plan.warnings)
    governor.apply(plan)
    assert ("delete", "ResourceFlavor", "p5.48xlarge") not in kueue.writes
    assert kueue.get("", "ResourceFlavor", "p5.48xlarge")["spec"]["topologyName"] == "topogov-network"
