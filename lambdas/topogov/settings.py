"""Configuration of the functions: one pydantic model, validated at cold start.

Logic never reads ``os.environ``; handlers build a settings object once and pass values down.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from topogov.domain.errors import ConfigError

ENV_PREFIX = "TOPOGOV_"


def _from_env(cls: type[BaseModel], what: str, environ: Mapping[str, str] | None) -> BaseModel:
    env = os.environ if environ is None else environ
    values: dict[str, str] = {}
    for name in cls.model_fields:
        raw = env.get(ENV_PREFIX + name.upper())
        if raw not in (None, ""):
            values[name] = raw
    region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
    if region and "region" in cls.model_fields:
        values.setdefault("region", region)
    try:
        return cls.model_validate(values)
    except ValidationError as exc:
        problems = "; ".join(
            f"{ENV_PREFIX}{'.'.join(str(p) for p in e['loc']).upper() or 'SETTINGS'}: {e['msg']}"
            for e in exc.errors()
        )
        raise ConfigError(f"invalid {what} configuration: {problems}") from exc


class _Settings(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    # The SageMaker HyperPod cluster whose task governance policy teams.yaml is (-c
    # topogov:hyperpodClusterArn): HyperPod mode (domain/hyperpod/mode.py), also when the cluster shows
    # no sign of it yet.
    hyperpod_cluster_arn: str | None = None

    @field_validator("hyperpod_cluster_arn")
    @classmethod
    def _a_cluster_arn(cls, v: str | None) -> str | None:
        from topogov.domain.hyperpod.api import cluster_arn_problem

        problem = cluster_arn_problem(v) if v else None
        if problem:
            raise ValueError(problem)
        return v or None

    def to_env(self) -> dict[str, str]:
        """The ``TOPOGOV_*`` environment that ``from_env`` reads back as these settings: the fields
        given explicitly (the rest keep the defaults written here). The CDK stack builds each
        function's environment with this, so the names and types are never written twice. The region
        is the runtime's (``AWS_REGION``)."""
        out: dict[str, str] = {}
        for name in sorted(self.model_fields_set - {"region"}):
            value = getattr(self, name)
            if value is not None:
                out[ENV_PREFIX + name.upper()] = str(value).lower() if isinstance(value, bool) else str(value)
        return out


class ApiSettings(_Settings):
    """Environment of the api function (``TOPOGOV_*`` variables)."""

    cluster_name: str | None = None
    kubeconfig: str | None = None
    policy_file: str = Field(..., min_length=1)
    snapshot_bucket: str = Field(..., min_length=3)
    snapshot_key: str = "topology/snapshot.json"
    ledger_table: str = Field(..., min_length=3)
    counters_table: str = Field(..., min_length=3)
    idempotency_table: str | None = None
    region: str | None = None
    # A warm container re-reads the snapshot at most this often (a conditional GET): the submit
    # decisions' "fits now" are as fresh as the last reconcile pass plus this.
    snapshot_ttl_s: float = Field(15.0, ge=0)
    kueue_version: str | None = Field(
        None,
        description="the Kueue release the estimates state, where its Deployment's image does not tell it",
    )

    @model_validator(mode="after")
    def _one_cluster(self) -> ApiSettings:
        if bool(self.cluster_name) == bool(self.kubeconfig):
            raise ValueError("set exactly one of TOPOGOV_CLUSTER_NAME (EKS) or TOPOGOV_KUBECONFIG")
        return self

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ApiSettings:
        return _from_env(cls, "api", environ)  # type: ignore[return-value]


class ReconcileSettings(_Settings):
    """Environment of the reconcile function (``TOPOGOV_*`` variables)."""

    cluster_name: str | None = Field(None, description="EKS cluster; endpoint, CA and tokens come from AWS")
    kubeconfig: str | None = Field(
        None, description="kubeconfig path instead of EKS (local stack, other clusters)"
    )
    snapshot_bucket: str = Field(..., min_length=3)
    snapshot_key: str = "topology/snapshot.json"
    ec2_rate_per_s: float = Field(
        1.0, gt=0, le=1000, description="client-side pace of DescribeInstanceTopology"
    )
    ec2_max_attempts: int = Field(5, ge=1, le=20, description="botocore standard-mode attempts per call")
    refresh_after_s: float = Field(
        24 * 3600, gt=0, description="re-ask EC2 about an instance after this long"
    )
    verify_after_s: float = Field(
        24 * 3600,
        gt=0,
        description="verify an answer adopted from the labels EKS wrote against EC2 after this long",
    )
    budget_margin_s: float = Field(
        15.0, ge=0, description="stop asking/patching this long before the timeout"
    )
    page_size: int = Field(500, ge=1, le=5000, description="nodes per list page")
    patch_concurrency: int = Field(8, ge=1, le=32, description="node label PATCHes in flight at once")
    region: str | None = None
    # The ledger sync (release the charges of finished or vanished jobs) runs when all three are set.
    policy_file: str | None = None
    ledger_table: str | None = None
    counters_table: str | None = None
    stale_reservation_s: float = Field(
        300, ge=0, description="release a charge whose Job was never created after this long"
    )
    # The governor (Kueue objects from the policy) runs on full passes when the policy is set.
    governor: bool = Field(True, description="keep the Kueue objects in step with the policy")
    kueue_api_version: Literal["v1beta1", "v1beta2"] | None = Field(
        None,
        description="the Kueue API version to read and write; unset: v1beta2 where the cluster serves "
        "it, else v1beta1 (adapters/kueue_api.py); set: it must be served, else the pass fails",
    )
    kueue_version: str | None = Field(
        None,
        description="the Kueue release, where neither its Deployment's image nor the task governance "
        "add-on tells it (domain/kueue_version.py)",
    )
    cohort: str = Field("topogov", pattern=r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")

    @model_validator(mode="after")
    def _one_cluster(self) -> ReconcileSettings:
        if bool(self.cluster_name) == bool(self.kubeconfig):
            raise ValueError("set exactly one of TOPOGOV_CLUSTER_NAME (EKS) or TOPOGOV_KUBECONFIG")
        return self

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ReconcileSettings:
        return _from_env(cls, "reconcile", environ)  # type: ignore[return-value]
