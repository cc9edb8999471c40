"""Pure parts of the governor: what counts as drift, what gets written back, hand edits told apart,
the plan's text; and the fallback decision with in-memory ports."""

from __future__ import annotations

import copy
import datetime as dt

from topogov.domain.labels import PREFERRED_ANNOTATION, RENDERED_ANNOTATION, REQUIRED_ANNOTATION
from topogov.domain.views.batch import JobView
from topogov.domain.views.objects import object_view as v
from topogov.domain.views.workload import WorkloadView
from topogov.logic.governor import (
    Action,
    Change,
    Plan,
    corrected,
    drift,
    edited_by_hand,
    format_plan,
    rendered_hash,
    stamped,
)
from topogov.logic.ledger_sync import fall_back

CQ = {
    "apiVersion": "kueue.x-k8s.io/v1beta1",
    "kind": "ClusterQueue",
    "metadata": {"name": "cq", "labels": {"app.kubernetes.io/managed-by": "topogov", "topogov.io/team": "a"}},
    "spec": {
        "cohort": "topogov",
        "stopPolicy": "None",
        "resourceGroups": [
            {
                "coveredResources": ["nvidia.com/gpu", "memory"],
                "flavors": [
                    {
                        "name": "p5.48xlarge",
                        "resources": [
                            {"name": "nvidia.com/gpu", "nominalQuota": 64},
                            {"name": "memory", "nominalQuota": "8Ti"},
                        ],
                    }
                ],
            }
        ],
    },
}


def live(obj):
    """As the API server returns it: server fields, Kueue's defaults, another label."""
    out = copy.deepcopy(stamped(v(obj)))
    out["metadata"].update(uid="u-1", resourceVersion="7", creationTimestamp="2026-11-30T00:00:00Z")
    out["metadata"]["labels"]["extra"] = "kept"
    out["spec"]["queueingStrategy"] = "BestEffortFIFO"
    out["spec"]["flavorFungibility"] = {"whenCanBorrow": "Borrow", "whenCanPreempt": "TryNextFlavor"}
    out["status"] = {"admittedWorkloads": 0}
    return out


def test_server_fields_defaults_and_other_labels_are_not_drift():
    assert drift(v(CQ), v(live(CQ))) == []


def test_a_changed_quota_is_drift_named_by_flavor_and_resource():
    current = live(CQ)
    current["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = 65
    assert drift(v(CQ), v(current)) == [
        "spec.resourceGroups[0].flavors[p5.48xlarge].resources[nvidia.com/gpu].nominalQuota: 65 -> 64"
    ]


def test_equal_quantities_are_equal_and_a_string_number_is_not_an_int_elsewhere():
    current = live(CQ)
    current["spec"]["resourceGroups"][0]["flavors"][0]["resources"][1]["nominalQuota"] = "8192Gi"
    current["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "64"
    assert drift(v(CQ), v(current)) == []
    current["spec"]["cohort"] = 1
    assert drift(v(CQ), v(current)) == ['spec.cohort: 1 -> "topogov"']


def test_an_added_field_inside_the_quotas_and_a_missing_label_are_drift():
    current = live(CQ)
    current["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["lendingLimit"] = 0
    del current["metadata"]["labels"]["topogov.io/team"]
    assert drift(v(CQ), v(current)) == [
        'metadata.labels.topogov.io/team: (absent) -> "a"',
        "spec.resourceGroups[0].flavors[p5.48xlarge].resources[nvidia.com/gpu].lendingLimit: 0 -> (absent)",
    ]


def test_an_added_or_removed_flavor_is_drift():
    current = live(CQ)
    flavors = current["spec"]["resourceGroups"][0]["flavors"]
    flavors.append({**flavors[0], "name": "p4d.24xlarge"})
    (line,) = drift(v(CQ), v(current))
    assert line.startswith("spec.resourceGroups[0].flavors: ")


def test_the_correction_keeps_metadata_and_writes_the_whole_rendered_spec():
    current = live(CQ)
    current["spec"]["stopPolicy"] = "Hold"
    current["metadata"]["annotations"]["owner-note"] = "x"
    out = corrected(v(CQ), v(current))
    assert out["spec"] == CQ["spec"]  # Kueue's defaults are left to the server to apply again
    assert out["metadata"]["resourceVersion"] == "7" and out["metadata"]["labels"]["extra"] == "kept"
    assert out["metadata"]["annotations"] == {RENDERED_ANNOTATION: rendered_hash(v(CQ)), "owner-note": "x"}
    assert "status" not in out


def test_hand_edits_are_told_apart_from_policy_changes():
    current = live(CQ)
    current["spec"]["stopPolicy"] = "Hold"
    assert edited_by_hand(v(CQ), v(current))
    new_policy = copy.deepcopy(CQ)
    new_policy["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = 32
    assert not edited_by_hand(v(new_policy), v(current))


def test_plan_text_lists_changes_counts_and_warnings():
    plan = Plan(
        api_version="kueue.x-k8s.io/v1beta1",
        flavors=["p5.48xlarge"],
        topologies={"p5.48xlarge": "topogov-3-layers"},
        unchanged=4,
    )
    gv = plan.api_version
    plan.changes = [
        Change(Action.CREATE, "LocalQueue", "lq", "ns-a", gv),
        Change(Action.UPDATE, "ClusterQueue", "cq", None, gv, ["spec.stopPolicy: x -> y"], "edited by hand"),
        Change(Action.UNOWNED, "ClusterQueue", "other", None, gv, reason="not ours"),
    ]
    plan.warnings = ["nominal nvidia.com/gpu quotas add up to 9, the cluster has 8"]
    assert format_plan(plan) == (
        "Kueue objects (kueue.x-k8s.io/v1beta1) for 1 GPU flavor(s): p5.48xlarge in topogov-3-layers\n"
        "  + create   LocalQueue ns-a/lq\n"
        "  ~ update   ClusterQueue cq\n"
        "        spec.stopPolicy: x -> y\n"
        "        (edited by hand)\n"
        "  ? unowned  ClusterQueue other\n"
        "        (not ours)\n"
        "Plan: 1 to create, 1 to update; 4 unchanged, 1 not Topogov's (left alone).\n"
        "warning: nominal nvidia.com/gpu quotas add up to 9, the cluster has 8\n"
    )
    assert format_plan(Plan(api_version=gv, skipped="no GPU")) == "Nothing to plan: no GPU\n"


# --- the fallback decision -----------------------------------------------------------------------

LEVEL = "topology.k8s.aws/network-node-layer-3"
NOW = dt.datetime(2026, 11, 30, 12, 0, 0, tzinfo=dt.UTC)


class Ledger:
    def __init__(self):
        self.recorded = []

    def record_fallback(self, team, name, fallback):
        self.recorded.append((team, name, fallback))
        return True


class Jobs:
    def __init__(self, outcome="switched", workload=None):
        self.outcome, self.workload, self.patched = outcome, workload, []

    def workload_for(self, namespace, uid):
        return self.workload

    def relax_topology(self, namespace, name, level, kind="Job"):
        self.patched.append((namespace, name, level))
        return self.outcome


def record(after=600, submitted="2026-11-30T11:50:00Z", mode="required", **extra):
    topo = {"mode": mode, "level": LEVEL, "fallback_after_s": after}
    return {
        "name": "j",
        "namespace": "ns",
        "submitted_at": submitted,
        "decision": {"topology": topo},
        **extra,
    }


def job(annotations=None, suspend=True):
    return JobView.from_api(
        {
            "metadata": {"uid": "u"},
            "spec": {
                "suspend": suspend,
                "template": {"metadata": {"annotations": annotations or {REQUIRED_ANNOTATION: LEVEL}}},
            },
        }
    )


def test_past_the_deadline_and_pending_it_falls_back_and_is_recorded():
    ledger, jobs = Ledger(), Jobs()
    assert fall_back("a", record(), job(), ledger, jobs, NOW)
    assert jobs.patched == [("ns", "j", LEVEL)]
    ((team, name, fb),) = ledger.recorded
    assert (team, name, fb["at"], fb["deadline"], fb["level"]) == (
        "a",
        "j",
        "2026-11-30T12:00:00Z",
        "2026-11-30T12:00:00Z",
        LEVEL,
    )
    assert "not admitted 600s after submission" in fb["reason"]


def test_before_the_deadline_admitted_already_done_or_not_required_nothing_happens():
    admitted = WorkloadView.from_api({"status": {"conditions": [{"type": "Admitted", "status": "True"}]}})
    cases = [
        (record(submitted="2026-11-30T11:50:01Z"), job(), Jobs()),  # one second early
        (record(), job(), Jobs(workload=admitted)),
        (record(fallback={"at": "x"}), job(), Jobs()),
        (record(mode="preferred"), job(), Jobs()),
        (record(after=None), job(), Jobs()),
        (record(), job(), Jobs(outcome="running")),  # Kueue unsuspended it between read and patch
    ]
    for rec, j, jobs in cases:
        ledger = Ledger()
        assert not fall_back("a", rec, j, ledger, jobs, NOW)
        assert ledger.recorded == []


def test_a_switch_whose_record_was_lost_is_recorded_and_its_workload_checked_again():
    # The Job already prefers LEVEL (an earlier pass patched it and stopped before recording): the
    # relax is asked again, for the Workload Kueue schedules, and answers "already"
    ledger, jobs = Ledger(), Jobs(outcome="already")
    assert fall_back("a", record(), job({PREFERRED_ANNOTATION: LEVEL}), ledger, jobs, NOW)
    assert jobs.patched == [("ns", "j", LEVEL)] and len(ledger.recorded) == 1
