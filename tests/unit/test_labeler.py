"""The labeler's pass logic, with in-memory fakes for its three ports (pure-logic unit tests)."""

from dataclasses import dataclass, field, replace

from topogov.domain.labels import ZONE_ID_LABEL, InstanceTopology, layer_label
from topogov.domain.quantity import Resources
from topogov.domain.snapshot import Snapshot
from topogov.domain.views.nodes import NodeView
from topogov.logic.labeler import Labeler, PassOptions, instances_to_ask


@dataclass
class Counters:
    reads: int = 0
    writes: int = 0


@dataclass
class Patch:
    outcome: str
    status: int = 200
    message: str = ""


class FakeNodes:
    """The nodes as the adapter answers them: views of the Node objects it holds."""

    def __init__(self, objs, fail=(), gone=()):
        self.objs = {o["metadata"]["name"]: o for o in objs}
        self.counters = Counters()
        self.fail = set(fail)
        self.gone = set(gone)

    def list_nodes(self):
        self.counters.reads += 1
        return [NodeView.from_api(o) for o in self.objs.values()]

    def get_node(self, name):
        self.counters.reads += 1
        obj = self.objs.get(name)
        return None if obj is None else NodeView.from_api(obj)

    def patch_labels(self, name, patch):
        self.counters.writes += 1
        if name in self.fail:
            return Patch("failed", 500, "boom")
        if name in self.gone:
            return Patch("gone", 404)
        labels = self.objs[name]["metadata"].setdefault("labels", {})
        for k, v in patch.items():
            if v is None:
                labels.pop(k, None)
            else:
                labels[k] = v
        return Patch("patched")

    def scan_pods(self):
        self.counters.reads += 1
        return {}, []

    def pod_defaults(self):
        return {"namespaces": {}, "runtime_classes": {}}


@dataclass
class Outcome:
    answers: dict
    asked: list
    unasked: list = field(default_factory=list)
    calls: int = 0
    retries: int = 0
    error: str | None = None


class FakeEc2:
    def __init__(self, topo, limit=None):
        self.topo = topo
        self.asked = []
        self.fleets = []
        self.limit = limit

    def describe(self, ids, deadline, fleet=None):
        ids = list(ids)
        self.fleets.append(fleet)
        take = ids if self.limit is None else ids[: self.limit]
        self.asked.append(take)
        answers = {i: self.topo[i] for i in take if i in self.topo}
        return Outcome(answers, take, ids[len(take) :], calls=(len(take) + 99) // 100)


class FakeStore:
    def __init__(self):
        self.snap = None
        self.saves = 0

    def load(self):
        return None if self.snap is None else Snapshot.from_json(self.snap.to_json())

    def save(self, snap):
        self.saves += 1
        self.snap = Snapshot.from_json(snap.to_json())


def node(name, iid, labels=None, provider=True):
    spec = {"providerID": f"aws:///us-east-1a/{iid}"} if provider else {}
    return {
        "metadata": {"name": name, "labels": dict(labels or {})},
        "spec": spec,
        "status": {"allocatable": {"nvidia.com/gpu": "8"}},
    }


def iid(n):
    return f"i-{n:017x}"


def topo(n, layers=3):
    return InstanceTopology(
        iid(n), tuple(f"nn-{n // 4:x}-{k}" for k in range(layers)), zone_id="use1-az1", fetched_at=1000.0
    )


def make(nodes, topos, **kw):
    fake_nodes = FakeNodes(nodes, **kw)
    ec2 = FakeEc2({t.instance_id: t for t in topos})
    store = FakeStore()
    return Labeler(fake_nodes, ec2, store, wall=lambda: 2000.0), fake_nodes, ec2, store


def test_first_pass_labels_every_node_then_steady_pass_asks_and_writes_nothing():
    lab, nodes, ec2, _store = make([node(f"n{i}", iid(i)) for i in range(5)], [topo(i) for i in range(5)])
    first = lab.run(PassOptions())
    assert (first.patched, first.ec2_calls, first.with_topology) == (5, 1, 5)
    assert nodes.objs["n0"]["metadata"]["labels"][layer_label(1)] == "nn-0-0"
    steady = lab.run(PassOptions())
    assert (steady.patched, steady.unchanged, steady.ec2_calls, steady.k8s_writes) == (0, 5, 0, 0)
    assert len(ec2.asked) == 1


def test_hand_edited_label_is_corrected_without_asking_ec2():
    lab, nodes, _ec2, _ = make([node("n0", iid(0))], [topo(0)])
    lab.run(PassOptions())
    nodes.objs["n0"]["metadata"]["labels"][layer_label(2)] = "edited"
    nodes.objs["n0"]["metadata"]["labels"]["team"] = "mine"
    s = lab.run(PassOptions())
    assert (s.patched, s.ec2_calls) == (1, 0)
    labels = nodes.objs["n0"]["metadata"]["labels"]
    assert labels[layer_label(2)] == "nn-0-1" and labels["team"] == "mine"


def test_skips_are_counted_by_reason_and_unsupported_instances_lose_stale_layer_labels():
    hp = node("hp", iid(9))
    hp["metadata"]["labels"]["sagemaker.amazonaws.com/compute-type"] = "hyperpod"
    bad = node("bad", "x")
    bad["spec"]["providerID"] = "aws:///us-east-1a/nope"
    cpu = node("cpu", iid(7), {layer_label(1): "stale", ZONE_ID_LABEL: "use1-az1", "team": "x"})
    nodes = [node("gpu", iid(1)), node("noid", iid(2), provider=False), hp, bad, cpu]
    lab, fake_nodes, _, _ = make(nodes, [topo(1)])
    s = lab.run(PassOptions())
    assert s.skipped == {
        "hyperpod_managed": 1,
        "malformed_provider_id": 1,
        "no_provider_id": 1,
        "not_in_ec2_answer": 1,
    }
    assert s.ec2_missing == [iid(7)]
    # EC2 reports no topology for it: a layer label there would mislead Kueue, so it goes; the zone
    # id (the cloud controller manager's on EKS) and other labels stay
    assert fake_nodes.objs["cpu"]["metadata"]["labels"] == {ZONE_ID_LABEL: "use1-az1", "team": "x"}
    assert s.patched == 2  # gpu labelled, cpu cleaned
    # the absence is remembered: the next pass does not ask again, and writes nothing
    s2 = lab.run(PassOptions())
    assert s2.ec2_calls == 0 and s2.skipped["not_in_ec2_answer"] == 1 and s2.patched == 0


def test_one_failing_node_never_stops_the_others_and_a_gone_node_is_skipped():
    lab, _, _, store = make(
        [node(f"n{i}", iid(i)) for i in range(4)], [topo(i) for i in range(4)], fail={"n1"}, gone={"n2"}
    )
    s = lab.run(PassOptions())
    assert (s.patched, s.failed, s.skipped.get("node_gone")) == (2, 1, 1)
    assert s.failures[0]["node"] == "n1" and not s.complete
    assert "n2" not in store.snap.nodes


def test_budget_cut_keeps_what_was_learned_and_the_next_pass_continues():
    lab, _, ec2, store = make([node(f"n{i}", iid(i)) for i in range(250)], [topo(i) for i in range(250)])
    ec2.limit = 100
    s1 = lab.run(PassOptions())
    assert (s1.patched, s1.skipped["pending"], s1.complete) == (100, 150, False)
    assert len(store.snap.instances) == 100
    s2 = lab.run(PassOptions())
    assert ec2.asked[1][0] == iid(100)  # asks only what it did not learn
    assert s2.patched == 100


def test_stale_answers_are_asked_again_after_the_refresh_interval():
    snap = Snapshot(instances={iid(1): topo(1), iid(2): InstanceTopology(iid(2), ("a",), fetched_at=1990.0)})
    assert instances_to_ask([iid(1), iid(2), iid(3)], snap, now=2000.0, refresh_after_s=500) == [
        iid(3),
        iid(1),
    ]
    assert instances_to_ask([iid(2)], snap, now=2000.0, refresh_after_s=500, forced=[iid(2)]) == [iid(2)]


def test_targeted_pass_reads_one_node_and_forces_a_fresh_answer():
    lab, nodes, ec2, _ = make([node(f"n{i}", iid(i)) for i in range(10)], [topo(i) for i in range(10)])
    lab.run(PassOptions())
    moved = InstanceTopology(iid(3), ("x", "y", "z"), zone_id="use1-az1")
    ec2.topo[iid(3)] = moved
    reads = nodes.counters.reads
    s = lab.run(PassOptions(targeted_instance_ids=frozenset({iid(3)})))
    assert (s.mode, s.patched, s.nodes_seen, s.ec2_instances_asked) == ("targeted", 1, 1, 1)
    assert nodes.counters.reads - reads == 1
    assert nodes.objs["n3"]["metadata"]["labels"][layer_label(1)] == "x"


def test_targeted_pass_for_an_instance_without_a_node_caches_the_answer():
    lab, _, _ec2, store = make([node("n0", iid(0))], [topo(0), topo(5)])
    lab.run(PassOptions())
    s = lab.run(PassOptions(targeted_instance_ids=frozenset({iid(5)})))
    assert s.skipped == {"node_not_registered": 1}
    assert iid(5) in store.snap.instances


def test_empty_cluster_is_a_clean_pass():
    lab, _, ec2, store = make([], [])
    s = lab.run(PassOptions())
    assert (s.nodes_seen, s.ec2_calls, s.complete) == (0, 0, True)
    assert ec2.asked == [] and store.snap is not None


def test_snapshot_has_capacity_per_domain():
    lab, _, _, store = make([node(f"n{i}", iid(i)) for i in range(8)], [topo(i) for i in range(8)])
    lab.run(PassOptions())
    tree = store.snap.to_json()["tree"]
    assert tree["depth"] == 3
    assert sum(d["allocatable"]["gpu"] for d in tree["domains"]) == 64
    assert store.snap.nodes["n0"].allocatable == Resources(gpu=8)


def test_the_written_snapshot_carries_the_capacity_view_of_its_nodes():
    """Made by the pass that writes the snapshot (domain/capacity.capacity_record), kept through
    the stored JSON, and made again when a targeted pass changes a node."""
    from topogov.domain.capacity import capacity_record
    from topogov.domain.labels import INSTANCE_TYPE_LABEL

    objs = [node(f"n{i}", iid(i), {INSTANCE_TYPE_LABEL: "p5.48xlarge"}) for i in range(8)]
    for obj in objs:  # Ready, so Kueue (and the view) counts their GPUs as free
        obj["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    lab, nodes, _, store = make(objs, [topo(i) for i in range(8)])
    lab.run(PassOptions())
    assert store.snap.capacity == capacity_record(store.snap.nodes)
    assert store.snap.capacity["view"]["instance_types"][0]["free_gpus"] == 64
    assert Snapshot.from_json(store.snap.to_json()).capacity == store.snap.capacity
    nodes.objs["n1"]["status"]["allocatable"]["nvidia.com/gpu"] = "4"
    lab.run(PassOptions())
    assert store.snap.capacity["view"]["instance_types"][0]["free_gpus"] == 60


def test_the_snapshot_is_written_only_when_its_content_changed():
    lab, nodes, _, store = make([node(f"n{i}", iid(i)) for i in range(3)], [topo(i) for i in range(3)])
    assert lab.run(PassOptions()).snapshot_written and store.saves == 1
    assert not lab.run(PassOptions()).snapshot_written and store.saves == 1
    nodes.objs["n1"]["metadata"]["labels"][layer_label(1)] = "edited"  # drift changes nothing stored
    assert not lab.run(PassOptions()).snapshot_written
    nodes.objs["n1"]["status"]["allocatable"]["nvidia.com/gpu"] = "4"  # capacity does
    assert lab.run(PassOptions()).snapshot_written and store.saves == 2


class SlowNodes(FakeNodes):
    """PATCHes that take a while, counting how many are in flight at once."""

    def __init__(self, objs, **kw):
        super().__init__(objs, **kw)
        import threading

        self._lock = threading.Lock()
        self.in_flight = 0
        self.most_in_flight = 0

    def patch_labels(self, name, patch):
        import time

        with self._lock:
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        time.sleep(0.01)
        try:
            with self._lock:
                return super().patch_labels(name, patch)
        finally:
            with self._lock:
                self.in_flight -= 1


def test_patches_run_concurrently_up_to_the_setting_and_each_outcome_is_its_nodes():
    nodes = [node(f"n{i}", iid(i)) for i in range(24)]
    fake = SlowNodes(nodes, fail={"n5"}, gone={"n7"})
    labeler = Labeler(fake, FakeEc2({iid(i): topo(i) for i in range(24)}), FakeStore(), patch_concurrency=4)
    outcome = labeler.reconcile(PassOptions())
    s = outcome.summary
    assert 1 < fake.most_in_flight <= 4
    assert (s.patched, s.failed, s.skipped.get("node_gone")) == (22, 1, 1)
    assert [f["node"] for f in s.failures] == ["n5"]
    assert fake.objs["n3"]["metadata"]["labels"][layer_label(1)] == topo(3).network_nodes[0]
    assert layer_label(1) not in fake.objs["n5"]["metadata"]["labels"]  # its PATCH failed
    # the snapshot's view of a node is its labels after its own PATCH
    nodes_in_snapshot = outcome.snapshot.nodes
    assert "n7" not in nodes_in_snapshot and nodes_in_snapshot["n3"].path == topo(3).network_nodes


def test_patches_whose_turn_comes_after_the_deadline_are_left_for_the_next_pass():
    ticks = iter([0.0] * 8 + [100.0] * 1000)  # the clock passes the deadline after a few reads
    nodes = [node(f"n{i}", iid(i)) for i in range(12)]
    labeler = Labeler(
        FakeNodes(nodes), FakeEc2({iid(i): topo(i) for i in range(12)}), FakeStore(),
        clock=lambda: next(ticks), patch_concurrency=3,
    )  # fmt: skip
    s = labeler.run(PassOptions(deadline=50.0))
    assert s.complete is False and s.patched + s.skipped.get("pending", 0) == 12
    assert 0 < s.patched < 12


# --- EKS's own labels --------------------------------------------------------------------------


def eks_labels(t):
    """The labels EKS writes on a node of a supported type: EC2's layers and the zone id."""
    return {**{layer_label(k): n for k, n in enumerate(t.network_nodes, 1)}, ZONE_ID_LABEL: t.zone_id}


def eks_node(name, n, t=None, itype="p5.48xlarge"):
    obj = node(name, iid(n), eks_labels(t or topo(n)))
    obj["metadata"]["labels"]["node.kubernetes.io/instance-type"] = itype
    return obj


class Clock:
    def __init__(self, now=2000.0):
        self.now = now

    def __call__(self):
        return self.now


class StampingEc2(FakeEc2):
    """Answers as the adapter does: each answer stamped with when EC2 gave it."""

    def __init__(self, topo, clock):
        super().__init__(topo)
        self.clock = clock

    def describe(self, ids, deadline, fleet=None):
        out = super().describe(ids, deadline, fleet)
        out.answers = {i: replace(t, fetched_at=self.clock()) for i, t in out.answers.items()}
        return out


def make_eks(nodes, topos, clock=None):
    clock = clock or Clock()
    fake_nodes = FakeNodes(nodes)
    ec2 = StampingEc2({t.instance_id: t for t in topos}, clock)
    store = FakeStore()
    return Labeler(fake_nodes, ec2, store, wall=clock), fake_nodes, ec2, store


def test_nodes_labelled_by_eks_are_adopted_without_an_ec2_call_and_nothing_is_written():
    # Given nodes that already carry EKS's layer labels and zone id, and no snapshot yet
    lab, _nodes, ec2, store = make_eks([eks_node(f"n{i}", i) for i in range(6)], [topo(i) for i in range(6)])
    # When the first pass runs
    s = lab.run(PassOptions())
    # Then EC2 is not asked, no node is written, and the snapshot holds the adopted answers
    assert (s.ec2_calls, s.k8s_writes, s.patched, s.adopted, s.unchanged) == (0, 0, 0, 6, 6)
    assert ec2.asked == []
    answer = store.snap.instances[iid(2)]
    assert answer.network_nodes == topo(2).network_nodes and answer.zone_id == "use1-az1"
    # an adopted answer is not an EC2 answer: adopted now, never fetched from EC2
    assert (answer.adopted_at, answer.fetched_at) == (2000.0, 0.0)
    assert store.snap.nodes["n2"].path == topo(2).network_nodes  # the tree is built on them


def test_partial_or_missing_labels_are_asked_of_ec2_as_before():
    gap = eks_node("gap", 1)
    del gap["metadata"]["labels"][layer_label(2)]
    short = eks_node("short", 2, InstanceTopology(iid(2), ("a", "b"), zone_id="z"))
    four = eks_node("four", 3, itype="p6-b200.48xlarge")  # a four-layer type with three layers
    empty = eks_node("empty", 4)
    empty["metadata"]["labels"][layer_label(3)] = ""
    bare = node("bare", iid(5))
    answers = [topo(1), topo(2), topo(3, layers=4), topo(4), topo(5)]
    lab, _nodes, ec2, _ = make_eks([gap, short, four, empty, bare], answers)
    s = lab.run(PassOptions())
    assert s.adopted == 0 and sorted(ec2.asked[0]) == sorted(iid(i) for i in range(1, 6))
    assert s.patched == 5  # EC2's answers written where the labels were partial or missing


def test_an_adopted_answer_is_verified_once_per_verify_after_and_drift_then_found_is_corrected():
    clock = Clock(2000.0)
    moved = InstanceTopology(iid(1), ("x", "y", "z"), zone_id="use1-az1")
    lab, nodes, ec2, store = make_eks([eks_node("n0", 0), eks_node("n1", 1)], [topo(0), moved], clock)
    options = PassOptions(refresh_after_s=100.0, verify_after_s=1000.0)
    assert lab.run(options).adopted == 2
    # Given the refresh interval has passed but not verify_after: adopted answers are not asked
    clock.now = 2500.0
    s = lab.run(options)
    assert (s.ec2_calls, s.k8s_writes) == (0, 0)
    # When verify_after has passed: EC2 is asked once about each, and where it differs it wins
    clock.now = 3000.0
    s = lab.run(options)
    assert sorted(ec2.asked[-1]) == [iid(0), iid(1)]
    assert (s.verified, s.patched) == (2, 1)
    assert nodes.objs["n1"]["metadata"]["labels"][layer_label(1)] == "x"
    confirmed, corrected = store.snap.instances[iid(0)], store.snap.instances[iid(1)]
    # confirmed: still label-backed, verified now; corrected: EC2's answer, its own refresh cadence
    assert (confirmed.adopted_at, confirmed.fetched_at) == (2000.0, 3000.0)
    assert (corrected.adopted_at, corrected.fetched_at) == (0.0, 3000.0)
    # And neither is asked again before its next interval (verify_after, refresh_after)
    asks = len(ec2.asked)
    clock.now = 3050.0
    assert lab.run(options).ec2_calls == 0 and len(ec2.asked) == asks


def test_an_adopted_answer_whose_labels_change_is_settled_by_ec2_not_re_adopted():
    lab, nodes, ec2, _ = make_eks([eks_node("n0", 0)], [topo(0)])
    lab.run(PassOptions())
    nodes.objs["n0"]["metadata"]["labels"][layer_label(3)] = "edited"
    s = lab.run(PassOptions())
    assert ec2.asked == [[iid(0)]] and (s.verified, s.patched) == (1, 1)
    assert nodes.objs["n0"]["metadata"]["labels"][layer_label(3)] == topo(0).network_nodes[2]


def test_an_event_naming_an_adopted_instance_still_asks_ec2():
    lab, nodes, ec2, _ = make_eks([eks_node(f"n{i}", i) for i in range(3)], [topo(i) for i in range(3)])
    lab.run(PassOptions())
    ec2.topo[iid(1)] = InstanceTopology(iid(1), ("p", "q", "r"), zone_id="use1-az1")  # stopped, started
    s = lab.run(PassOptions(targeted_instance_ids=frozenset({iid(1)})))
    assert ec2.asked == [[iid(1)]] and s.patched == 1
    assert nodes.objs["n1"]["metadata"]["labels"][layer_label(1)] == "p"


def test_the_labeler_hands_ec2_the_clusters_instance_types():
    nodes = [eks_node("n0", 0), node("n1", iid(1), {"node.kubernetes.io/instance-type": "p5.48xlarge"})]
    lab, _, ec2, _ = make_eks(nodes, [topo(0), topo(1)])
    lab.run(PassOptions())
    assert ec2.asked == [[iid(1)]]
    assert ec2.fleets == [{iid(0): "p5.48xlarge", iid(1): "p5.48xlarge"}]
