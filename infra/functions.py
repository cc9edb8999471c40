"""Lambda code and dependencies, bundled without Docker, and one factory for both functions.

- The dependencies layer is ``pip install --platform manylinux2014_x86_64 --only-binary=:all:
  --python-version 3.12`` of ``requirements/runtime.txt`` behind CDK local bundling; its asset hash
  is the hash of that file, so it is rebuilt only when a pin changes.
- The function code is the ``topogov`` package, whole (an allow-list: :data:`SHIPPED`, the only
  package copied; the CLI and the local stack are other distributions in other folders), plus the
  team policy at ``policy/teams.yaml``; its asset hash covers both.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsii
from aws_cdk import (
    AssetHashType,
    BundlingOptions,
    DockerImage,
    Duration,
    ILocalBundling,
    RemovalPolicy,
    Stack,
)
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.names import PIP_PLATFORM, POLICY_IN_BUNDLE, PYTHON_VERSION, SERVICE

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ROOT / "lambdas"
SHIPPED = ("topogov",)  # the packages of the function asset: nothing else under lambdas/ is copied
PACKAGE = SOURCES / "topogov"
REQUIREMENTS = ROOT / "requirements" / "runtime.txt"
NOMINAL_IMAGE = DockerImage.from_registry("public.ecr.aws/sam/build-python3.12")  # never pulled


def _digest(paths: list[Path]) -> str:
    h = hashlib.sha256()
    for p in sorted(paths):
        h.update(str(p.relative_to(ROOT)).encode())
        h.update(p.read_bytes())
    return h.hexdigest()


def shipped_sources() -> list[Path]:
    """Every module of the packages in :data:`SHIPPED`."""
    return sorted(
        p for name in SHIPPED for p in (SOURCES / name).rglob("*.py") if "__pycache__" not in p.parts
    )


@jsii.implements(ILocalBundling)
class PipLayerBundling:
    def __init__(self, requirements: Path) -> None:
        self.requirements = requirements

    def try_bundle(self, output_dir: str, *_: Any, **__: Any) -> bool:
        target = Path(output_dir) / "python"
        # Without network access, point TOPOGOV_WHEELHOUSE at a directory of the wheels
        # (`pip download --platform manylinux2014_x86_64 --only-binary=:all: --python-version 3.12 -r ...`).
        wheelhouse = os.environ.get("TOPOGOV_WHEELHOUSE")
        offline = ["--no-index", "--find-links", wheelhouse] if wheelhouse else []
        pip = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        platform = ["--platform", PIP_PLATFORM, "--implementation", "cp", "--python-version", PYTHON_VERSION]
        subprocess.run(
            [
                *pip,
                *platform,
                "--only-binary=:all:",
                "--target",
                str(target),
                "-r",
                str(self.requirements),
                *offline,
            ],
            check=True,
        )
        for junk in target.rglob("__pycache__"):
            shutil.rmtree(junk, ignore_errors=True)
        return True


@jsii.implements(ILocalBundling)
class PackageBundling:
    def __init__(self, policy: Path) -> None:
        self.policy = policy

    def try_bundle(self, output_dir: str, *_: Any, **__: Any) -> bool:
        out = Path(output_dir)
        for src in shipped_sources():
            dest = out / src.relative_to(SOURCES)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest)
        (out / POLICY_IN_BUNDLE).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(self.policy, out / POLICY_IN_BUNDLE)
        return True


def dependencies_layer(scope: Construct) -> lambda_.LayerVersion:
    return lambda_.LayerVersion(
        scope,
        "Dependencies",
        description="topogov runtime dependencies (requirements/runtime.txt), manylinux2014_x86_64 cp312",
        compatible_runtimes=[lambda_.Runtime.PYTHON_3_12],
        compatible_architectures=[lambda_.Architecture.X86_64],
        code=lambda_.Code.from_asset(
            str(REQUIREMENTS.parent),
            asset_hash_type=AssetHashType.CUSTOM,
            asset_hash=_digest([REQUIREMENTS]),
            bundling=BundlingOptions(image=NOMINAL_IMAGE, local=PipLayerBundling(REQUIREMENTS)),
        ),
    )


def function_code(policy: Path) -> lambda_.Code:
    return lambda_.Code.from_asset(
        str(SOURCES),
        asset_hash_type=AssetHashType.CUSTOM,
        asset_hash=_digest([*shipped_sources(), policy]),
        bundling=BundlingOptions(image=NOMINAL_IMAGE, local=PackageBundling(policy)),
    )


@dataclass(frozen=True)
class FunctionContext:
    """What both functions are built with (the stack makes one and hands it to each construct)."""

    config: Any  # infra.config.DeployConfig
    storage: Any  # infra.storage.Storage
    code: lambda_.Code
    layer: lambda_.ILayerVersion
    log_retention: logs.RetentionDays
    vpc_config: dict[str, Any] | None


@dataclass
class FunctionSpec:
    name: str  # "api" or "reconcile"
    handler: str
    timeout: Duration
    memory_mb: int
    environment: dict[str, str]
    reserved_concurrency: int | None = None


class TopogovFunction(Construct):
    """A function with its own role (logs to its own log group only, X-Ray) and log group."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        spec: FunctionSpec,
        context: FunctionContext,
        **function_kwargs: Any,
    ) -> None:
        super().__init__(scope, id)
        self.log_group = logs.LogGroup(
            self, "Logs", retention=context.log_retention, removal_policy=RemovalPolicy.DESTROY
        )
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"{SERVICE} {spec.name} function",
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[self.log_group.log_group_arn, f"{self.log_group.log_group_arn}:*"],
            )
        )
        self.function = lambda_.Function(
            self,
            "Function",
            runtime=lambda_.Runtime.PYTHON_3_12,
            architecture=lambda_.Architecture.X86_64,
            handler=spec.handler,
            code=context.code,
            layers=[context.layer],
            role=self.role,
            timeout=spec.timeout,
            memory_size=spec.memory_mb,
            reserved_concurrent_executions=spec.reserved_concurrency,
            tracing=lambda_.Tracing.ACTIVE,
            log_group=self.log_group,
            environment={
                "POWERTOOLS_SERVICE_NAME": SERVICE,
                "POWERTOOLS_METRICS_NAMESPACE": "Topogov",
                "POWERTOOLS_LOG_LEVEL": "INFO",
                **spec.environment,
            },
            **(context.vpc_config or {}),
            **function_kwargs,
        )

    def allow_describe_cluster(self, cluster_name: str) -> None:
        """``eks:DescribeCluster`` on this cluster only: endpoint and CA for the Kubernetes client."""
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="DescribeTheCluster",
                actions=["eks:DescribeCluster"],
                resources=[
                    Stack.of(self).format_arn(service="eks", resource="cluster", resource_name=cluster_name)
                ],
            )
        )
