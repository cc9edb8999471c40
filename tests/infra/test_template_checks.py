"""Two checkers independent of cdk-nag - cfn-lint and checkov, pinned in requirements/checks.txt and
installed in .venv/checks by ``make install`` - on the synthesized template, offline (no network
namespace where ``unshare`` can make one; checkov with ``--skip-download``): no finding, and each
suppression (in the resource's Metadata, infra/nag.py) still needed, on its resource, with a reason."""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
from pathlib import Path

import aws_cdk as cdk
import pytest

import app as appmod

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ROOT / ".venv" / "checks" / "bin"
CONTEXT = {
    "topogov:clusterName": "gpu-training",
    "topogov:account": "111122223333",
    "topogov:region": "us-west-2",
}
EVERY_OPTION = {  # the other shape of the stack: private cluster, account role, organisation, e-mail
    "topogov:vpcId": "vpc-0123456789abcdef0",
    "topogov:subnetIds": "subnet-0123456789abcdef0",
    "topogov:securityGroupId": "sg-0123456789abcdef0",
    "topogov:apiGatewayCloudWatchRole": "true",
    "topogov:apiOrganizationId": "o-abcdefghij",
    "topogov:alarmEmail": "oncall@example.com",
}
HYPERPOD = {  # on a HyperPod cluster: teams.yaml's task governance policy (AWS::SageMaker::ComputeQuota ...)
    "topogov:hyperpodClusterArn": "arn:aws:sagemaker:us-west-2:111122223333:cluster/a1b2c3d4e5f6",
}


def _offline() -> list[str]:
    unshare = shutil.which("unshare")
    if unshare and subprocess.run([unshare, "-n", "true"], capture_output=True, check=False).returncode == 0:
        return [unshare, "-n"]
    return []


def template(extra: dict[str, str] | None = None) -> dict:
    app = cdk.App(context={**CONTEXT, **(extra or {}), "aws:cdk:bundling-stacks": []})
    stack = appmod.build(app)
    return app.synth().get_stack_by_name(stack.stack_name).template


def cfn_lint(doc: dict, tmp: Path) -> list[tuple[str, str]]:
    """(rule, resource) of every cfn-lint finding (errors, warnings, informational)."""
    path = tmp / "template.json"
    path.write_text(json.dumps(doc))
    proc = subprocess.run(
        [*_offline(), str(TOOLS / "cfn-lint"), "--format", "json", "--", str(path)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode in (0, 2, 4, 6, 8, 10, 12, 14), proc.stderr[-2000:]
    found = json.loads(proc.stdout or "[]")
    return sorted((f["Rule"]["Id"], f["Location"]["Path"][1]) for f in found)


def checkov(doc: dict, tmp: Path) -> tuple[list[tuple[str, str]], list[dict]]:
    """(rule, resource) of every failed checkov check, and the skipped checks (with their comments)."""
    path = tmp / "template.json"
    path.write_text(json.dumps(doc))
    argv = [str(TOOLS / "checkov"), "-f", str(path), "--framework", "cloudformation", "-o", "json"]
    proc = subprocess.run(
        [*_offline(), *argv, "--skip-download", "--compact"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    results = report["results"] if isinstance(report, dict) else report[0]["results"]
    failed = sorted((c["check_id"], c["resource"].split(".", 1)[1]) for c in results["failed_checks"])
    return failed, results["skipped_checks"]


def suppressions(doc: dict) -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    """(rule, resource) of the cfn-lint and of the checkov suppressions in the template's Metadata."""
    lint, ckv = set(), set()
    for name, res in doc["Resources"].items():
        meta = res.get("Metadata", {})
        for rule in meta.get("cfn-lint", {}).get("config", {}).get("ignore_checks", []):
            assert len(meta["cfn-lint"]["reasons"][rule]) >= 40, (name, rule)
            lint.add((rule, name))
        for skip in meta.get("checkov", {}).get("skip", []):
            assert len(skip["comment"]) >= 40, (name, skip)
            ckv.add((skip["id"], name))
    return lint, ckv


def without_suppressions(doc: dict) -> dict:
    bare = copy.deepcopy(doc)
    for res in bare["Resources"].values():
        for tool in ("cfn-lint", "checkov"):
            res.get("Metadata", {}).pop(tool, None)
    return bare


@pytest.fixture(scope="module", autouse=True)
def tools():
    for tool in ("cfn-lint", "checkov"):
        assert (TOOLS / tool).exists(), f"{TOOLS / tool} is missing: run `make install` (make checks-tools)"


@pytest.mark.parametrize("extra", [None, EVERY_OPTION, HYPERPOD], ids=["default", "every-option", "hyperpod"])
def test_cfn_lint_and_checkov_find_nothing_and_every_suppression_is_still_needed(extra, tmp_path):
    doc = template(extra)
    assert cfn_lint(doc, tmp_path) == []
    failed, skipped = checkov(doc, tmp_path)
    assert failed == []
    lint, ckv = suppressions(doc)
    assert {(s["check_id"], s["resource"].split(".", 1)[1]) for s in skipped} == ckv
    # Without the suppressions, each tool finds exactly what is suppressed: none is stale, none hides
    # anything else, and the tools really ran on this template.
    bare = without_suppressions(doc)
    assert set(cfn_lint(bare, tmp_path)) == lint
    failed, _ = checkov(bare, tmp_path)
    assert set(failed) == ckv
    assert len(failed) == len(ckv)  # one finding per suppression, none twice


def test_the_real_findings_are_fixed_not_suppressed():
    """CKV_AWS_115 on the api function (it could take the whole account's concurrency while requests
    wait on a slow Kubernetes API: stage throttling bounds the rate, not that) is fixed by reserved
    concurrency, configurable; nothing suppresses it unless ``apiReservedConcurrency`` is 0. The
    reconcile function's is suppressed with its reason: one pass at a time is a lease now, and a
    reservation is what a small account cannot deploy."""
    doc = template()
    _, ckv = suppressions(doc)
    fns = {r["Properties"]["Handler"]: r["Properties"] for r in doc["Resources"].values()
           if r["Type"] == "AWS::Lambda::Function"}  # fmt: skip
    api = fns["topogov.handlers.api.handler"]
    assert api["ReservedConcurrentExecutions"] == 25
    assert "ReservedConcurrentExecutions" not in fns["topogov.handlers.reconcile.handler"]
    suppressed_115 = {resource for rule, resource in ckv if rule == "CKV_AWS_115"}
    assert len(suppressed_115) == 1 and "Reconcile" in next(iter(suppressed_115)), suppressed_115
    other = template({"topogov:apiReservedConcurrency": "40"})
    (api40,) = [
        r["Properties"]
        for r in other["Resources"].values()
        if r["Type"] == "AWS::Lambda::Function" and r["Properties"]["Handler"] == api["Handler"]
    ]
    assert api40["ReservedConcurrentExecutions"] == 40
    none = template({"topogov:apiReservedConcurrency": "0"})
    _, ckv_none = suppressions(none)
    assert len({resource for rule, resource in ckv_none if rule == "CKV_AWS_115"}) == 2
