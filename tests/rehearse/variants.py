"""What the rehearsal deploys besides the default stack (issue 22): a dependency-only update of the layer,
the private-cluster variant in a new account's concurrency limit, and the HyperPod variant (issue 25:
``hyperpodClusterArn``, a HyperPod cluster created in the emulator by :func:`hyperpod_cluster`).

* **A layer-only change** changes ``requirements/runtime.txt`` as the synth sees it, not in the
  repository: a copy of the app (``app.py``, ``infra/``, ``lambdas/topogov/``, ``requirements/``,
  the upgrade's policy at the same path relative to the copy) whose ``runtime.txt`` gains a line. The
  function asset is hashed by path relative to the app and content (``infra/functions._digest``), so
  it is the same asset; the layer's hash covers the pins' file (``infra/layer.digest``), so the layer
  alone changes. The added line is a comment: pip installs the same packages, as after a bump of a
  pin whose wheels are identical — what the rehearsal looks at is what CloudFormation and Lambda do
  with a new layer, not what is in it.
* **The private-cluster variant**: a VPC, two subnets and a security group created in the emulator,
  the account's limit set to a new account's 10, ``apiReservedConcurrency=0``. The CDK CLI looks the
  account's Availability Zones up for the VPC (EC2 DescribeAvailabilityZones against the emulator)
  and caches them in ``cdk.context.json`` where it runs: :func:`context_file_kept` puts that file back
  as it was.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.rehearse.conftest import ROOT

LAYER_BUMP = "# rehearsed: a dependency-only release (the layer alone changes)\n"
NEW_ACCOUNT_CONCURRENCY = 10  # Lambda quotas: a new account's concurrent executions may be this low


def app_copy(directory: Path, policy: Path, policy_text: str) -> tuple[Path, Path]:
    """A copy of the app whose ``requirements/runtime.txt`` has :data:`LAYER_BUMP` appended, with the
    policy ``policy`` (a path under ``ROOT``) at the same relative path; ``(app directory, policy)``."""
    app = directory / "app-layer-bump"
    if app.exists():
        shutil.rmtree(app)
    app.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copy2(ROOT / "app.py", app / "app.py")
    shutil.copy2(ROOT / "cdk.json", app / "cdk.json")
    for tree in ("infra", "requirements", "lambdas/topogov"):
        shutil.copytree(ROOT / tree, app / tree, ignore=ignore)
    runtime = app / "requirements" / "runtime.txt"
    runtime.write_text(runtime.read_text() + LAYER_BUMP)
    copied = app / policy.relative_to(ROOT)
    copied.parent.mkdir(parents=True, exist_ok=True)
    copied.write_text(policy_text)
    return app, copied


def app_command(app: Path) -> str:
    """The ``--app`` of the copy: the project's interpreter (its ``topogov``) on the copy's ``app.py``
    (its ``infra``: the script's directory comes first on the path)."""
    return f"{ROOT / '.venv' / 'bin' / 'python'} {app / 'app.py'}"


@contextlib.contextmanager
def context_file_kept() -> Iterator[None]:
    """``cdk.context.json`` of the repository as it was before, whatever a run wrote into it."""
    path = ROOT / "cdk.context.json"
    before = path.read_bytes() if path.exists() else None
    try:
        yield
    finally:
        if before is None:
            path.unlink(missing_ok=True)
        else:
            path.write_bytes(before)


def private_network(ec2: Any) -> dict[str, str]:
    """A VPC with two subnets and a security group, as a private cluster's functions would use."""
    vpc = ec2.create_vpc(CidrBlock="10.42.0.0/16")["Vpc"]["VpcId"]
    zones = [z["ZoneName"] for z in ec2.describe_availability_zones()["AvailabilityZones"]][:2]
    subnets = [
        ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.42.{i}.0/24", AvailabilityZone=zone)["Subnet"]["SubnetId"]
        for i, zone in enumerate(zones, 1)
    ]
    group = ec2.create_security_group(GroupName="topogov-functions", Description="topogov", VpcId=vpc)
    return {"vpcId": vpc, "subnetIds": ",".join(subnets), "securityGroupId": group["GroupId"]}


def live_version(fns: Any, function: str) -> tuple[str, list[str]]:
    """The version the ``live`` alias points at, and that version's layers."""
    version = fns.get_alias(FunctionName=function, Name="live")["FunctionVersion"]
    config = fns.get_function_configuration(FunctionName=function, Qualifier=version)
    return str(version), [x["Arn"] for x in config.get("Layers") or []]


def hyperpod_cluster(sagemaker: Any, name: str, instance_types: dict[str, int]) -> str:
    """A SageMaker HyperPod cluster (EKS-orchestrated) with one instance group per type; its ARN (by id)."""
    groups = [
        {
            "InstanceGroupName": f"group-{i}",
            "InstanceType": itype,
            "InstanceCount": count,
            "LifeCycleConfig": {"SourceS3Uri": "s3://sagemaker-lifecycle/", "OnCreate": "on_create.sh"},
            "ExecutionRole": "arn:aws:iam::123456789012:role/hyperpod-nodes",
        }
        for i, (itype, count) in enumerate(sorted(instance_types.items()))
    ]
    return str(sagemaker.create_cluster(ClusterName=name, InstanceGroups=groups)["ClusterArn"])
