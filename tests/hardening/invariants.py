"""What must hold after every race and every fault: read from the systems themselves, never from the
code under test's own bookkeeping.

* the ledger equals the cluster: every active record (``submitted``) has its Job; every Job the API
  created (``app.kubernetes.io/managed-by: topogov``) has an active record, or a released one whose
  Job finished; nothing is left ``reserving``; each team's counter equals the sum of the charges of
  its active records;
* labels equal EC2's answer: every EC2-backed node carries exactly the ``topology.k8s.aws/*`` labels
  that DescribeInstanceTopology reports (asked directly, with boto3), and a node EC2 reports no
  topology for carries no network-node layer label.
"""

from __future__ import annotations

from typing import Any

from topogov.domain.labels import ZONE_ID_LABEL, layer_label
from topogov.domain.nodes import NodeKind, classify
from topogov.domain.policy import load_policy_file

ATTRS = ("gpu", "efa", "cpu_m", "memory")


def _scan(client: Any, table: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {"TableName": table, "ConsistentRead": True}
    while True:
        page = client.scan(**kwargs)
        items.extend(page.get("Items", []))
        if "LastEvaluatedKey" not in page:
            return items
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def _n(item: dict[str, Any], key: str) -> int:
    return int(item[key]["N"]) if key in item else 0


def _finished(job: dict[str, Any]) -> bool:
    conds = (job.get("status") or {}).get("conditions") or []
    return any(c.get("status") == "True" and c.get("type") in ("Complete", "Failed") for c in conds)


def ledger_vs_cluster(stack: Any) -> dict[str, Any]:
    """Every discrepancy between the ledger, the counters and the Jobs (all empty when consistent)."""
    policy = load_policy_file(str(stack.options.policy_file))
    ddb = stack.client("dynamodb")
    records = _scan(ddb, stack.output("LedgerTable"))
    counters = {i["team"]["S"]: i for i in _scan(ddb, stack.output("CountersTable"))}
    kube = stack.kube()
    out: dict[str, Any] = {
        "lost_jobs": [],  # active record, no Job
        "jobs_without_record": [],  # a Job the API created, no record at all
        "uncharged_jobs": [],  # a running Job whose record was released
        "reserving": [],  # a record left half-way
        "counter_mismatch": {},  # team -> (counter, sum of active charges)
    }
    by_team: dict[str, dict[str, dict[str, Any]]] = {}
    for r in records:
        by_team.setdefault(r["team"]["S"], {})[r["name"]["S"]] = r
    for team_name, team in policy.teams.items():
        mine = by_team.get(team_name, {})
        jobs = {
            j["metadata"]["name"]: j
            for j in kube.request("GET", f"/apis/batch/v1/namespaces/{team.namespace}/jobs").body.get("items")
            or []
        }
        for name, r in mine.items():
            state = r["state"]["S"]
            if state == "reserving":
                out["reserving"].append(f"{team_name}/{name}")
            elif state == "submitted" and name not in jobs:
                out["lost_jobs"].append(f"{team_name}/{name}")
            elif state == "released" and name in jobs and not _finished(jobs[name]):
                out["uncharged_jobs"].append(f"{team_name}/{name}")
        for name, job in jobs.items():
            managed = (job["metadata"].get("labels") or {}).get("app.kubernetes.io/managed-by") == "topogov"
            if managed and name not in mine:
                out["jobs_without_record"].append(f"{team_name}/{name}")
        active = [r for r in mine.values() if r["state"]["S"] != "released"]
        want = tuple(sum(_n(r, f"charge_{a}") for r in active) for a in ATTRS)
        have = tuple(_n(counters.get(team_name, {}), a) for a in ATTRS)
        if want != have:
            out["counter_mismatch"][team_name] = {"counter": have, "active_charges": want}
    return out


def consistent(found: dict[str, Any]) -> bool:
    return not any(found.values())


def items_lost(found: dict[str, Any]) -> int:
    """Jobs, records or charges out of step (the report's "items lost")."""
    return sum(len(v) for v in found.values())


def ec2_truth(stack: Any, instance_ids: list[str]) -> dict[str, dict[str, Any]]:
    ec2 = stack.client("ec2")
    out: dict[str, dict[str, Any]] = {}
    for i in range(0, len(instance_ids), 100):
        for item in ec2.describe_instance_topology(InstanceIds=instance_ids[i : i + 100])["Instances"]:
            out[item["InstanceId"]] = item
    return out


def mislabelled_nodes(stack: Any) -> list[str]:
    """EC2-backed nodes whose topology.k8s.aws/* labels differ from EC2's answer."""
    nodes = stack.kube().request("GET", "/api/v1/nodes").body["items"]
    refs = {}
    for node in nodes:
        ref = classify((node.get("spec") or {}).get("providerID"), node["metadata"].get("labels") or {})
        if ref.kind == NodeKind.EC2:
            refs[node["metadata"]["name"]] = (ref.instance_id, node)
    truth = ec2_truth(stack, sorted({iid for iid, _ in refs.values()}))
    wrong = []
    for name, (iid, node) in refs.items():
        have = {
            k: v
            for k, v in (node["metadata"].get("labels") or {}).items()
            if k.startswith("topology.k8s.aws/")
        }
        item = truth.get(iid)
        want = {}
        if item is None:  # no topology: no layer label (a zone id label may be the CCM's)
            have = {k: v for k, v in have.items() if k != ZONE_ID_LABEL}
        else:
            want = {layer_label(i): n for i, n in enumerate(item["NetworkNodes"], start=1)}
            want[ZONE_ID_LABEL] = item["ZoneId"]
        if have != want:
            wrong.append(name)
    return sorted(wrong)
