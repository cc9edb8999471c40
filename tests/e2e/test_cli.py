"""The `topogov` command line: every command's --help, and the labeler commands on the local stack."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from topogov_cli.main import main

COMMANDS = [
    [],
    ["local"],
    ["topology"],
    ["reconcile"],
    ["bench"],
    ["bench", "reconcile"],
    ["bench", "governor"],
    ["governor"],
    ["governor", "plan"],
    ["governor", "apply"],
]


@pytest.mark.parametrize("cmd", COMMANDS, ids=lambda c: " ".join(c) or "topogov")
def test_every_command_has_help(cmd, capsys):
    with pytest.raises(SystemExit) as exc:
        main([*cmd, "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: topogov")


def test_unknown_command_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["nope"])
    assert exc.value.code == 2


def test_topology_mermaid_and_json_from_one_list(stack, capsys):
    assert main(["topology", "--kubeconfig", str(stack.kubeconfig)]) == 0
    mermaid = capsys.readouterr().out
    assert mermaid.startswith("flowchart TD\n")
    assert 'root["Cluster"]' in mermaid and "unplaced" in mermaid
    assert main(["topology", "--format", "json", "--kubeconfig", str(stack.kubeconfig)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {"depth", "levels", "domains", "unplaced"} <= set(doc)


def test_topology_against_an_unreachable_cluster_exits_3(tmp_path, capsys):
    cfg = tmp_path / "kubeconfig"
    from topogov_local.cluster.controlplane import write_kubeconfig

    (tmp_path / "ca.crt").write_text("")
    write_kubeconfig(cfg, "https://127.0.0.1:9", tmp_path / "ca.crt", token="x")
    assert main(["topology", "--kubeconfig", str(cfg)]) == 3
    assert "cannot read nodes" in capsys.readouterr().err


def test_reconcile_command_runs_one_pass(stack, capsys):
    code = main(
        [
            "reconcile",
            "--kubeconfig",
            str(stack.kubeconfig),
            "--bucket",
            stack.output("SnapshotBucket"),
            "--ec2-rate",
            "1000",
        ]
    )
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["mode"] == "full" and summary["failed"] == 0


def test_local_once_runs_the_walkthrough_and_cleans_up(tmp_path):
    """The walkthrough against the real stack: labels, Kueue's objects, refusals, and jobs that
    Kueue admits, places, preempts and reclaims; every line it prints fits 100 columns, no JSON log
    line in it (they go to a file), and no step timed out."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    for k in [k for k in env if k.startswith(("TOPOGOV_", "AWS_"))]:
        env.pop(k)
    out = subprocess.run(
        [sys.executable, "-m", "topogov_cli.main", "local", "--once", "--api-port", "0"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    (tmp_path / "walkthrough.txt").write_text(out.stdout)  # pytest keeps tmp_path: read it after a failure
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    text = out.stdout
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 100, max(lines, key=len)
    assert not [line for line in lines if line.startswith("{")], "a JSON log line in the story"
    assert "(!)" not in text, [line for line in lines if "(!)" in line]
    # it ends with the dashboard's URL (served while the stack runs), then stops
    assert re.search(r"signed as topogov-admin:\n  http://127\.0\.0\.1:\d+/\?token=\S+\n", text), text[-800:]
    # the AWS side is the deployed stack: its tables and bucket, named by its outputs
    assert "stack Topogov, deployed to the emulator by `cdk deploy`; the functions use:" in text
    assert re.search(r"^  LedgerTable +Topogov-StorageLedger\w+-\w+$", text, re.M)
    assert re.search(r"^  SnapshotBucket +topogov-storagesnapshot\w+-\w+$", text, re.M)
    # the labeler
    assert "full pass · nodes 75" in text and "EC2 calls 1" in text
    assert "malformed_provider_id 1" in text
    assert "patched 0 · unchanged 68" in text  # the steady pass
    assert "targeted pass · nodes 1" in text
    assert re.search(r"^nn-\w+\s+layer-1\s+32 nodes  256/256 GPUs free$", text, re.M)  # the tree
    local = Path(tmp_path, ".topogov", "local")
    mermaid = (local / "topology.mmd").read_text()
    assert "flowchart TD" in mermaid and "Layer 4:" in mermaid
    # the governor: objects created by the first pass, kubectl lists them, a hand edit is planned
    # and corrected
    # (14 Kueue objects and the 3 teams' pod rules; the namespaces: rbac.yaml)
    assert "17 created" in text and "3 unchanged" in text
    # what if: a policy change replayed on the snapshot's fleet, its effect in figures
    assert "What if: a policy change replayed on this fleet" in text
    assert re.search(r"^  baseline: \d+ nodes, policy \S*teams\.yaml$", text, re.M)
    assert "Wait p95, baseline -> proposed: team-a " in text
    assert "clusterqueue.kueue.x-k8s.io/hyperpod-ns-team-a-clusterqueue" in text
    assert "resourceflavor.kueue.x-k8s.io/p6-b200.48xlarge" in text and "topogov-4-layers" in text
    assert 'spec.stopPolicy: "Hold" -> "None"' in text and "(edited by hand)" in text
    assert "0 created, 1 updated, 0 deleted" in text
    assert "refused (422 TOPOLOGY_INFEASIBLE)" in text and "refused (422 PRIORITY_NOT_ALLOWED)" in text
    # a PyTorchJob through the API: its pods in one layer-3 domain, the operator's rendezvous on them
    assert "A Kubeflow PyTorchJob: a master and 3 workers, placed as one in a layer-3 domain" in text
    assert re.search(r"^kind +kubeflow\.org/v1 PyTorchJob$", text, re.M), text
    assert re.search(r"^landed +4 of 4 pods on 4 nodes, one layer-3 domain \(nn-\w+\)", text, re.M), text
    assert "MASTER_ADDR=llm-pt-master-0" in text and "PET_NNODES=4" in text
    assert "cancelled llm-pt (team team-a): PyTorchJob deleted" in text
    # jobs that run: AWS's example in one layer-3 domain, a job from Admitted to Succeeded
    assert re.search(r"^landed +10 of 10 pods on \d+ nodes?, one layer-3 domain \(nn-\w+\)", text, re.M)
    # (under load the first poll may still see it Pending)
    timeline = r"^  (Pending [\d.]+s -> )?Admitted [\d.]+s -> Running [\d.]+s -> Succeeded [\d.]+s$"
    assert re.search(timeline, text, re.M)
    # borrowing and reclaiming, waiting for another job, priority preemption (Kueue's own reasons)
    assert "kueue: Preempted (InCohortReclamation)" in text and "kueue: Preempted (InClusterQueue)" in text
    assert "c-exp Succeeded; c-next Running" in text and "c-next Succeeded; a-big Running" in text
    # the pending job's start estimate, then its real start beside it
    assert re.search(r"^estimate\n  start      (now|in \d+s \(\S+\))", text, re.M), text
    beside = r"c-next: estimated to start at \S+, Kueue admitted it at \S+ \(\d+ s (later|earlier)"
    assert re.search(beside, text), text
    # the fallback relaxes a job that could not start, and Kueue starts it
    assert "fallbacks this pass: team-a/wide-l2" in text
    # (a KIND column when the list holds more than batch Jobs: high-level jobs are PyTorchJobs here)
    assert re.search(r"^wide-l2 +(\w+ +)?team-a +Running .* relaxed layer-2 ", text, re.M)
    # where each job landed, the fleet's placement quality, capacity, and what a big job waits for
    assert re.search(r"^test-tas-job +(Job +)?team-a +Running .* layer-3 ×1( |$)", text, re.M), text
    assert re.search(r"^  placement: \d+ running multi-pod jobs, in one domain: layer-1 100%", text, re.M)
    assert "LARGEST JOB NOW" in text and "(the snapshot of the reconcile pass)" in text
    closest = r"^  closest    layer-2 domain nn-\w+ \(16 nodes\): holds \d+ of 16 pods now"
    assert re.search(closest, text, re.M)
    # the in-flight cap holds under a burst
    burst = re.search(r"-> (\d+) x 201, (\d+) x 429; in flight 0 -> (\d+) of 256 GPUs", text)
    assert burst and int(burst[2]) > 0 and int(burst[3]) <= 256
    # least privilege: both functions called AWS under their deployed roles, and IAM allowed each call
    assert re.search(r"^  the api function, role Topogov-ApiHandlerRole\w+-\w+: [1-9]\d* calls$", text, re.M)
    assert re.search(r"^    ec2:DescribeInstanceTopology +[1-9]\d*$", text, re.M)
    assert re.search(r"^  -> [1-9]\d* allowed, 0 refused$", text, re.M)
    iam = json.loads((local / "iam.json").read_text())  # kept when the stack stopped
    assert iam["denied"] == [] and iam["allowed"] > 0
    assert (local / "logs" / "functions.log").read_text().startswith("{")
    assert (local / "kubeconfig").exists() and (local / "aws-credentials").exists()
    assert not (local / "endpoints.json").exists()  # removed on exit


def _governor(stack, *args):
    return main(
        ["governor", *args, "--kubeconfig", str(stack.kubeconfig), "--bucket", stack.output("SnapshotBucket")]
    )


def test_governor_plan_shows_the_diff_and_changes_nothing_then_apply_converges(stack, capsys):
    from topogov.handlers.reconcile import handler
    from topogov_local import events
    from topogov_local.lambda_context import LocalContext

    os.environ["TOPOGOV_GOVERNOR"] = "false"  # the pass labels nodes and writes the snapshot only
    try:
        handler(events.scheduled_event(), LocalContext())
    finally:
        del os.environ["TOPOGOV_GOVERNOR"]
    capsys.readouterr()  # the pass's own log lines (Powertools writes to the stdout it found first)
    kube = stack.kube()
    before = kube.request("GET", "/_emulator/requests").body

    assert _governor(stack, "plan") == 0
    text = capsys.readouterr().out
    # the version discovery chooses: v1beta2, which the local Kueue v0.17.0 serves
    assert text.startswith("Kueue objects (kueue.x-k8s.io/v1beta2) for 2 GPU flavor(s)")
    assert "  + create   ClusterQueue hyperpod-ns-team-a-clusterqueue" in text
    assert "  + create   LocalQueue hyperpod-ns-team-c/hyperpod-ns-team-c-localqueue" in text
    assert "Namespace" not in text  # deploy/rbac.yaml declares the team namespaces: they are there
    assert "  + create   ConfigMap topogov-system/pod-rules-team-a" in text  # the team pod rules
    assert "Plan: 17 to create; 3 unchanged." in text
    after = kube.request("GET", "/_emulator/requests").body
    assert {k: v for k, v in after.items() if not k.startswith("GET")} == {
        k: v for k, v in before.items() if not k.startswith("GET")
    }

    assert _governor(stack, "plan", "--json", "--kueue-api-version", "v1beta2") == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["api_version"] == "kueue.x-k8s.io/v1beta2" and doc["counts"]["create"] == 17  # + 3 pod rules

    assert _governor(stack, "apply") == 0
    assert "applied 17 change(s); 0 failed" in capsys.readouterr().out
    assert _governor(stack, "plan") == 0
    assert "Plan: no changes; 17 unchanged." in capsys.readouterr().out


def test_governor_plan_with_an_invalid_policy_exits_2_naming_the_problem(stack, tmp_path, capsys):
    bad = tmp_path / "teams.yaml"
    bad.write_text(
        "priorityClasses: [{name: low, value: 1}]\n"
        "teams:\n"
        "  a: {principals: ['arn:aws:iam::1:role/a'], namespace: shared, priorityClasses: [urgent]}\n"
        "  b: {principals: ['arn:aws:iam::1:role/b'], namespace: shared}\n"
    )
    assert _governor(stack, "plan", "--policy", str(bad)) == 2
    err = capsys.readouterr().err
    assert "teams.a.priorityClasses.0: urgent is not declared in priorityClasses" in err
    assert "teams.b.namespace: shared is already the namespace of team a" in err
