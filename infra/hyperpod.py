"""HyperPod task governance's policy, from ``teams.yaml``: one ``AWS::SageMaker::ComputeQuota`` per team
and the cluster's ``AWS::SageMaker::ClusterSchedulerConfig`` (only with
``-c topogov:hyperpodClusterArn=...``). The properties are the request bodies the domain renders
(``topogov.domain.hyperpod.render``: the registry schemas use the API's member names), so ``cdk diff``
shows a policy change as the properties CloudFormation will change, and ``cdk deploy`` applies it with
CloudFormation's rollback. Changing a team's weight, quota, sharing or preemption updates its quota in
place (a new version); a new team name replaces it (Name and TeamName are create-only).

aws-cdk-lib 2.275.0 (the newest release) has ``CfnClusterSchedulerConfig`` but no ``CfnComputeQuota``:
the quotas are ``CfnResource`` of the type, as an L1 class would render them; cfn-lint checks their
properties against the registry schema (tests/infra/test_template_checks.py).

No IAM is granted here: the functions call none of these APIs; CloudFormation calls them with the
deployer's (or the CDK's execution role's) permissions, which the registry schema lists per handler
(``sagemaker:CreateComputeQuota``, ``eks:AssociateAccessPolicy``, ...; docs/hyperpod.md).
"""

from __future__ import annotations

from aws_cdk import CfnResource
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from topogov.domain.hyperpod import TaskGovernance

COMPUTE_QUOTA = "AWS::SageMaker::ComputeQuota"


class HyperPodPolicy(Construct):
    """One ComputeQuota per team (construct id ``ComputeQuota-<team>``) and the ClusterSchedulerConfig."""

    def __init__(self, scope: Construct, id: str, *, governance: TaskGovernance) -> None:
        super().__init__(scope, id)
        self.compute_quotas = {
            quota["Name"]: CfnResource(
                self, f"ComputeQuota-{quota['Name']}", type=COMPUTE_QUOTA, properties=quota
            )
            for quota in governance.compute_quotas
        }
        request = governance.scheduler_config
        config = request["SchedulerConfig"]
        self.scheduler_config = sagemaker.CfnClusterSchedulerConfig(
            self,
            "ClusterSchedulerConfig",
            name=request["Name"],
            cluster_arn=request["ClusterArn"],
            scheduler_config=sagemaker.CfnClusterSchedulerConfig.SchedulerConfigProperty(
                priority_classes=[
                    sagemaker.CfnClusterSchedulerConfig.PriorityClassProperty(
                        name=pc["Name"], weight=pc["Weight"]
                    )
                    for pc in config["PriorityClasses"]
                ],
                fair_share=config["FairShare"],
                idle_resource_sharing=config.get("IdleResourceSharing"),
            ),
        )
