"""Deployment inputs from ``cdk.json`` context (or ``-c key=value``), validated with clear errors.

No AWS calls at synth time: everything the stack needs is given here.
"""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from infra.names import LOG_RETENTION
from topogov.domain.hyperpod import api as hyperpod_api
from topogov.domain.regions import supported_list, unsupported

PREFIX = "topogov:"
ROOT = Path(__file__).resolve().parents[1]


class DeployConfigError(ValueError):
    pass


def refuse_unsupported_region(region: str) -> None:
    """A Region without DescribeInstanceTopology or Lambda SnapStart (``topogov/domain/regions.py``,
    each list citing AWS's page) is refused at synth, with what it lacks and where the stack can run;
    CloudFormation would create most of the stack there and the labeler, or the API's published
    version, would fail only once deployed."""
    missing = unsupported(region)
    if missing:
        raise ValueError("; ".join(missing) + f". Regions with both: {supported_list()}")


# The Regions AWS::SageMaker::ComputeQuota is available in: its CloudFormation registry schema's
# description (cfn-lint 1.58's bundled schemas): "Available in 15 regions (...)".
COMPUTE_QUOTA_REGIONS = (
    "us-east-1", "us-east-2", "us-west-1", "us-west-2", "ap-south-1", "ap-southeast-1", "ap-southeast-2",
    "ap-southeast-3", "ap-northeast-1", "eu-central-1", "eu-west-1", "eu-west-2", "eu-north-1",
    "eu-south-2", "sa-east-1",
)  # fmt: skip


def refuse_other_region(cluster_arn: str, region: str) -> None:
    """The policy resources are made in the stack's Region and name the cluster there: a cluster of
    another Region is refused at synth, as is a Region without AWS::SageMaker::ComputeQuota."""
    where = hyperpod_api.cluster_region(cluster_arn)
    if where != region:
        raise ValueError(
            f"the HyperPod cluster is in {where} but the stack deploys to {region}: deploy the stack "
            "to the cluster's Region (ComputeQuota and ClusterSchedulerConfig name a cluster of their "
            "own Region)"
        )
    if region not in COMPUTE_QUOTA_REGIONS:
        raise ValueError(
            f"AWS::SageMaker::ComputeQuota is not available in {region} (its CloudFormation schema lists "
            f"{', '.join(COMPUTE_QUOTA_REGIONS)})"
        )


class DeployConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    cluster_name: str = Field(..., pattern=r"^[0-9A-Za-z][A-Za-z0-9\-_]{0,99}$", description="EKS cluster")
    account: str | None = Field(None, pattern=r"^\d{12}$")
    region: str | None = Field(None, pattern=r"^[a-z]{2}(-gov)?-[a-z]+-\d$")
    policy_file: str = "teams.yaml"
    reconcile_schedule: str = "rate(5 minutes)"
    vpc_id: str | None = Field(None, pattern=r"^vpc-[0-9a-f]{8,17}$")
    subnet_ids: tuple[str, ...] = ()
    security_group_id: str | None = Field(None, pattern=r"^sg-[0-9a-f]{8,17}$")
    log_retention_days: int = 30
    alarm_email: str | None = Field(None, pattern=r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
    alarm_topic_arn: str | None = Field(None, pattern=r"^arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[\w-]+$")
    drift_alarm_threshold: int = Field(50, ge=1, description="nodes patched by one pass before alarming")
    api_latency_alarm_ms: int = Field(3000, ge=100)
    api_rate_limit: float = Field(50, gt=0)
    api_burst_limit: int = Field(100, ge=1)
    submit_rate_limit: float = Field(10, gt=0)
    submit_burst_limit: int = Field(20, ge=1)
    api_reserved_concurrency: int = Field(
        25,
        ge=0,
        le=1000,
        description="concurrent executions reserved for (and the most taken by) the API; 0 reserves none",
    )
    kueue_api_version: Literal["v1beta1", "v1beta2"] | None = Field(
        None,
        description="the Kueue API version the governor writes (unset: v1beta2 where served)",
    )
    label_verify_after: int = Field(
        86400,
        ge=300,
        description="seconds before the labeler verifies labels it adopted (EKS's own) against EC2",
    )
    governor: bool = Field(True, description="keep the Kueue objects in step with the policy")
    api_gateway_cloud_watch_role: bool = Field(
        False,
        description="create API Gateway's account-wide CloudWatch Logs role (replaces the account's own)",
    )
    api_organization_id: str | None = Field(
        None, pattern=r"^o-[a-z0-9]{10,32}$", description="let the API be called from this AWS Organization"
    )
    hyperpod_cluster_arn: str | None = Field(
        None, description="the SageMaker HyperPod cluster whose task governance policy teams.yaml becomes"
    )

    @field_validator("hyperpod_cluster_arn")
    @classmethod
    def _cluster_arn(cls, v: str | None) -> str | None:
        problem = hyperpod_api.cluster_arn_problem(v) if v is not None else None
        if problem:
            raise ValueError(problem)
        return v

    @field_validator("reconcile_schedule")
    @classmethod
    def _schedule(cls, v: str) -> str:
        if not re.match(r"^(rate\(\d+ (minute|minutes|hour|hours|day|days)\)|cron\(.+\))$", v):
            raise ValueError("must be an EventBridge expression: rate(5 minutes) or cron(...)")
        return v

    @field_validator("region")
    @classmethod
    def _region(cls, v: str | None) -> str | None:
        if v is not None:
            refuse_unsupported_region(v)
        return v

    @field_validator("log_retention_days")
    @classmethod
    def _retention(cls, v: int) -> int:
        if v not in LOG_RETENTION:
            raise ValueError(f"must be one of CloudWatch Logs' retention periods: {sorted(LOG_RETENTION)}")
        return v

    @field_validator("subnet_ids", mode="before")
    @classmethod
    def _subnets(cls, v: Any) -> Any:
        if isinstance(v, str):
            v = [s.strip() for s in v.split(",") if s.strip()]
        for s in v or ():
            if not re.match(r"^subnet-[0-9a-f]{8,17}$", s):
                raise ValueError(f"{s!r} is not a subnet id")
        return tuple(v or ())

    @model_validator(mode="after")
    def _network(self) -> DeployConfig:
        given = [bool(self.vpc_id), bool(self.subnet_ids), bool(self.security_group_id)]
        if any(given) and not all(given):
            raise ValueError(
                "vpcId, subnetIds and securityGroupId go together (clusters with a private endpoint)"
            )
        if self.alarm_email and self.alarm_topic_arn:
            raise ValueError("give alarmEmail or alarmTopicArn, not both")
        if self.hyperpod_cluster_arn and self.region:
            refuse_other_region(self.hyperpod_cluster_arn, self.region)
        if self.hyperpod_cluster_arn and self.account:
            owner = hyperpod_api.cluster_account(self.hyperpod_cluster_arn)
            if owner != self.account:
                raise ValueError(
                    f"the HyperPod cluster belongs to account {owner} but the stack deploys to {self.account}"
                )
        return self

    @property
    def policy_path(self) -> Path:
        p = Path(self.policy_file)
        return p if p.is_absolute() else ROOT / p

    @classmethod
    def from_context(cls, get: Any) -> DeployConfig:
        """``get(key)`` is ``app.node.try_get_context``; keys are ``topogov:camelCase``."""
        values = {}
        for name in cls.model_fields:
            camel = re.sub(r"_([a-z])", lambda m: m.group(1).upper(), name)
            raw = get(PREFIX + camel)
            if raw is not None and raw != "":
                values[name] = raw
        for key in ("governor", "api_gateway_cloud_watch_role"):
            if isinstance(values.get(key), str):  # -c key=true gives a string
                values[key] = {"true": True, "false": False}.get(values[key].lower(), values[key])
        for key, coerce in (
            ("log_retention_days", int),
            ("drift_alarm_threshold", int),
            ("api_burst_limit", int),
            ("submit_burst_limit", int),
            ("api_reserved_concurrency", int),
            ("label_verify_after", int),
            ("api_latency_alarm_ms", int),
            ("api_rate_limit", float),
            ("submit_rate_limit", float),
        ):
            if isinstance(values.get(key), str):  # -c key=value gives strings
                with contextlib.suppress(ValueError):  # else the model names the field
                    values[key] = coerce(values[key])
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            lines = []
            for e in exc.errors():
                field = ".".join(str(p) for p in e["loc"])
                camel = re.sub(r"_([a-z])", lambda m: m.group(1).upper(), field) if field else "context"
                lines.append(f"  {PREFIX}{camel}: {e['msg'].removeprefix('Value error, ')}")
            raise DeployConfigError(
                "invalid deployment context (cdk.json or -c):\n" + "\n".join(lines)
            ) from None
