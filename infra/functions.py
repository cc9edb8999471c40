"""Lambda code and dependencies, bundled without Docker, and one factory for both functions.

- The dependencies layer is ``pip install --platform manylinux2014_x86_64 --only-binary=:all:
  --python-version 3.12`` of ``requirements/runtime.txt`` behind CDK local bundling, without what no
  function imports (:mod:`infra.layer`); its asset hash covers the pins and the pruning, so it is
  rebuilt only when one of them changes.
- The function code is the ``topogov`` package, whole (an allow-list: :data:`SHIPPED`, the only
  package copied; the CLI and the local stack are other distributions in other folders), plus the
  team policy at ``policy/teams.yaml``; its asset hash covers both.
"""

from __future__ import annotations

import hashlib
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsii
from aws_cdk import (
    Annotations,
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

from infra import layer
from infra.names import PIP_PLATFORM, POLICY_IN_BUNDLE, SERVICE

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ROOT / "lambdas"
SHIPPED = ("topogov",)  # the packages of the function asset: nothing else under lambdas/ is copied
PACKAGE = SOURCES / "topogov"
REQUIREMENTS = layer.REQUIREMENTS
# x86_64, not arm64: every wheel of the layer exists for manylinux2014_aarch64 too, but the layer's
# native code (pydantic-core, PyYAML, wrapt, charset-normalizer) is exercised only on x86_64 here (the
# tests, the local stack, the benchmarks), and arm64's 20 % lower price per GB-second is cents a month
# at this service's load. Moving means PIP_PLATFORM (infra/names.py) and this together.
ARCHITECTURE = lambda_.Architecture.X86_64
RUNTIME = lambda_.Runtime.PYTHON_3_12  # SnapStart needs 3.12+ (the api function uses it)
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
    """The layer's content: :func:`infra.layer.bundle` (pip for the Lambda platform, then pruned)."""

    def try_bundle(self, output_dir: str, *_: Any, **__: Any) -> bool:
        layer.bundle(Path(output_dir))
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


def dependencies_layer(scope: Construct, code: lambda_.Code | None = None) -> lambda_.LayerVersion:
    """The layer; ``code`` stands in for the bundled dependencies (tests of what a change does)."""
    return lambda_.LayerVersion(
        scope,
        "Dependencies",
        description=f"topogov runtime dependencies (requirements/runtime.txt), {PIP_PLATFORM} cp312, pruned",
        compatible_runtimes=[RUNTIME],
        compatible_architectures=[ARCHITECTURE],
        code=code
        or lambda_.Code.from_asset(
            str(REQUIREMENTS.parent),
            asset_hash_type=AssetHashType.CUSTOM,
            asset_hash=layer.digest(),
            bundling=BundlingOptions(image=NOMINAL_IMAGE, local=PipLayerBundling()),
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
    # SnapStart on published versions, invoked through the alias ``live`` (``TopogovFunction.target``),
    # which always names the version this deployment published; the version before it is deleted, as a
    # snapshot is charged for as long as its version exists.
    snap_start: bool = False


ALIAS = "live"

# What Lambda needs of a VPC function's execution role to create and manage the function's network
# interfaces: the actions of the managed policy AWSLambdaVPCAccessExecutionRole, whose CloudWatch Logs
# part the role already has for its own log group. Lambda checks them when the function is created
# or its VpcConfig changes, and refuses otherwise ("The provided execution role does not have
# permissions to call CreateNetworkInterface on EC2"). DescribeNetworkInterfaces works only when
# allowed on all resources (Lambda Developer Guide, "Giving Lambda functions access to resources in
# an Amazon VPC", execution role permissions); the managed policy grants all of them on "*". CDK adds
# this policy only to roles it creates itself, and these roles are the stack's own.
VPC_ACCESS_ACTIONS = (
    "ec2:CreateNetworkInterface",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeSubnets",
    "ec2:DeleteNetworkInterface",
    "ec2:AssignPrivateIpAddresses",
    "ec2:UnassignPrivateIpAddresses",
)


def vpc_access_statement() -> iam.PolicyStatement:
    return iam.PolicyStatement(sid="VpcNetworkInterfaces", actions=list(VPC_ACCESS_ACTIONS), resources=["*"])


class TopogovFunction(Construct):
    """A function with its own role (logs to its own log group only, X-Ray) and log group; with
    SnapStart, its published version and the alias its callers invoke (``target``)."""

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
        self.spec = spec
        self.log_group = logs.LogGroup(
            self, "Logs", retention=context.log_retention, removal_policy=RemovalPolicy.DESTROY
        )
        self.role = self._role(spec, context)
        self.function = self._function(spec, context, function_kwargs)
        self.alias: lambda_.Alias | None = None
        if spec.snap_start:
            self.alias = lambda_.Alias(self, "Live", alias_name=ALIAS, version=self.function.current_version)
            # CDK warns that SnapStart needs published versions: current_version and the alias are those.
            Annotations.of(self.function).acknowledge_warning(
                "@aws-cdk/aws-lambda:snapStartRequirePublish",
                "published through current_version and the alias",
            )

    def _role(self, spec: FunctionSpec, context: FunctionContext) -> iam.Role:
        """Its own role: its own log group only, and the network interfaces of a VPC function."""
        role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"{SERVICE} {spec.name} function",
        )
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[self.log_group.log_group_arn, f"{self.log_group.log_group_arn}:*"],
            )
        )
        if context.vpc_config:
            role.add_to_policy(vpc_access_statement())
        return role

    def _function(
        self, spec: FunctionSpec, context: FunctionContext, function_kwargs: dict[str, Any]
    ) -> lambda_.Function:
        return lambda_.Function(
            self,
            "Function",
            runtime=RUNTIME,
            architecture=ARCHITECTURE,
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
            snap_start=lambda_.SnapStartConf.ON_PUBLISHED_VERSIONS if spec.snap_start else None,
            current_version_options=lambda_.VersionOptions(removal_policy=RemovalPolicy.DESTROY)
            if spec.snap_start
            else None,
            **(context.vpc_config or {}),
            **function_kwargs,
        )

    @property
    def function_reserved(self) -> bool:
        """Whether the function reserves concurrency (``FunctionSpec.reserved_concurrency``)."""
        return self.spec.reserved_concurrency is not None

    @property
    def target(self) -> lambda_.IFunction:
        """What callers invoke: the alias with SnapStart (``$LATEST`` never has a snapshot), else the
        function."""
        return self.alias or self.function

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
