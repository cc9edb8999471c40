"""The stack: a thin composition of one construct per capability."""

from __future__ import annotations

from aws_cdk import CfnOutput, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.api import Api
from infra.cluster_access import ClusterAccess
from infra.config import DeployConfig
from infra.functions import dependencies_layer, function_code
from infra.observability import Observability
from infra.reconciler import Reconciler
from infra.storage import Storage

R = logs.RetentionDays
RETENTION = {
    1: R.ONE_DAY,
    3: R.THREE_DAYS,
    5: R.FIVE_DAYS,
    7: R.ONE_WEEK,
    14: R.TWO_WEEKS,
    30: R.ONE_MONTH,
    60: R.TWO_MONTHS,
    90: R.THREE_MONTHS,
    120: R.FOUR_MONTHS,
    150: R.FIVE_MONTHS,
    180: R.SIX_MONTHS,
    365: R.ONE_YEAR,
    400: R.THIRTEEN_MONTHS,
    545: R.EIGHTEEN_MONTHS,
    731: R.TWO_YEARS,
    1096: R.THREE_YEARS,
    1827: R.FIVE_YEARS,
    2192: R.SIX_YEARS,
    2557: R.SEVEN_YEARS,
    2922: R.EIGHT_YEARS,
    3288: R.NINE_YEARS,
    3653: R.TEN_YEARS,
}


class TopogovStack(Stack):
    def __init__(
        self, scope: Construct, id: str, *, config: DeployConfig, teams: list[str], **kwargs: object
    ) -> None:
        super().__init__(scope, id, **kwargs)
        retention = RETENTION[config.log_retention_days]
        vpc_config = None
        if config.vpc_id:
            vpc = ec2.Vpc.from_vpc_attributes(
                self,
                "Vpc",
                vpc_id=config.vpc_id,
                availability_zones=self.availability_zones[: len(config.subnet_ids)],
                private_subnet_ids=list(config.subnet_ids),
            )
            vpc_config = {
                "vpc": vpc,
                "vpc_subnets": ec2.SubnetSelection(
                    subnets=[
                        ec2.Subnet.from_subnet_id(self, f"Subnet{i}", s)
                        for i, s in enumerate(config.subnet_ids)
                    ]
                ),
                "security_groups": [
                    ec2.SecurityGroup.from_security_group_id(self, "Sg", config.security_group_id)
                ],
            }
        self.storage = Storage(self, "Storage")
        layer = dependencies_layer(self)
        code = function_code(config.policy_path)
        common = {"config": config, "storage": self.storage, "code": code, "layer": layer,
                  "log_retention": retention, "vpc_config": vpc_config}  # fmt: skip
        self.reconciler = Reconciler(self, "Reconciler", **common)
        self.api = Api(self, "Api", **common)
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
        CfnOutput(
            self, "ApiUrl", value=self.api.url, description="base URL of the REST API (routes under /v1)"
        )
        CfnOutput(self, "SnapshotBucket", value=self.storage.snapshot_bucket.bucket_name)
        CfnOutput(self, "ReconcilerRoleArn", value=self.reconciler.fn.role.role_arn)
        CfnOutput(self, "ApiRoleArn", value=self.api.fn.role.role_arn)
