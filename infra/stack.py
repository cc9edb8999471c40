"""The stack: a thin composition of one construct per capability."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aws_cdk import CfnOutput, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.api import Api
from infra.cluster_access import ClusterAccess
from infra.config import DeployConfig
from infra.functions import FunctionContext, dependencies_layer, function_code
from infra.hyperpod import HyperPodPolicy
from infra.names import LOG_RETENTION
from infra.observability import Observability
from infra.reconciler import Reconciler
from infra.storage import Storage
from topogov.domain.hyperpod import TaskGovernance

# Feature flags the stack's correctness rests on, set on the stack itself (before any construct),
# so that every synth has them: the CDK CLI's (cdk.json), the tests' and the local stack's.
# recognizeLayerVersion: a function's version hash covers its layers, so a change of the dependencies
# layer alone publishes a new version of the api function and moves the alias ``live`` to it (off,
# the alias kept serving the old dependencies while the reconcile function's $LATEST ran the new).
FEATURE_FLAGS = {"@aws-cdk/aws-lambda:recognizeLayerVersion": True}


class TopogovStack(Stack):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        config: DeployConfig,
        teams: list[str],
        principal_roles: Sequence[str] = (),
        layer_code: lambda_.Code | None = None,
        governance: TaskGovernance | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, id, **kwargs)
        for flag, value in FEATURE_FLAGS.items():
            self.node.set_context(flag, value)
        self.storage = Storage(self, "Storage")
        context = FunctionContext(
            config=config,
            storage=self.storage,
            code=function_code(config.policy_path),
            layer=dependencies_layer(self, layer_code),
            log_retention=getattr(logs.RetentionDays, LOG_RETENTION[config.log_retention_days]),
            vpc_config=self._vpc_config(config),
        )
        self.reconciler = Reconciler(self, "Reconciler", context=context)
        self.api = Api(self, "Api", context=context, principal_roles=principal_roles)
        self.cluster_access = ClusterAccess(
            self,
            "ClusterAccess",
            cluster_name=config.cluster_name,
            reconciler=self.reconciler.fn.role,
            api=self.api.fn.role,
        )
        self.observability = Observability(
            self,
            "Observability",
            config=config,
            functions={"Reconcile": self.reconciler.fn.function, "Api": self.api.fn.function},
            dead_letters=self.reconciler.dlq,
            rest_api=self.api.rest_api,
            teams=teams,
        )
        # HyperPod task governance's policy, when the stack is given the cluster (topogov:hyperpodClusterArn)
        self.hyperpod = HyperPodPolicy(self, "HyperPod", governance=governance) if governance else None
        CfnOutput(
            self, "ApiUrl", value=self.api.url, description="base URL of the REST API (routes under /v1)"
        )
        CfnOutput(self, "SnapshotBucket", value=self.storage.snapshot_bucket.bucket_name)
        CfnOutput(self, "LedgerTable", value=self.storage.ledger.table_name, description="one item per job")
        CfnOutput(self, "CountersTable", value=self.storage.counters.table_name)
        CfnOutput(self, "IdempotencyTable", value=self.storage.idempotency.table_name)
        CfnOutput(
            self,
            "ApiInvokeArn",
            value=self.api.rest_api.arn_for_execute_api(stage="prod"),
            description="what a caller's IAM policy grants execute-api:Invoke on (every route of the API)",
        )
        CfnOutput(self, "ReconcilerRoleArn", value=self.reconciler.fn.role.role_arn)
        CfnOutput(self, "ApiRoleArn", value=self.api.fn.role.role_arn)

    def _vpc_config(self, config: DeployConfig) -> dict[str, Any] | None:
        """The functions in the cluster's VPC, for a cluster with a private endpoint."""
        if not (config.vpc_id and config.security_group_id):
            return None
        vpc = ec2.Vpc.from_vpc_attributes(
            self,
            "Vpc",
            vpc_id=config.vpc_id,
            availability_zones=self.availability_zones[: len(config.subnet_ids)],
            private_subnet_ids=list(config.subnet_ids),
        )
        subnets = [ec2.Subnet.from_subnet_id(self, f"Subnet{i}", s) for i, s in enumerate(config.subnet_ids)]
        return {
            "vpc": vpc,
            "vpc_subnets": ec2.SubnetSelection(subnets=subnets),
            "security_groups": [
                ec2.SecurityGroup.from_security_group_id(self, "Sg", config.security_group_id)
            ],
        }
