"""EKS access: one access entry per function role, mapped to the Kubernetes groups that
``deploy/rbac.yaml`` binds (the only permissions the roles get inside the cluster)."""

from __future__ import annotations

from aws_cdk import aws_eks as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

from infra.names import API_GROUP, RECONCILER_GROUP


class ClusterAccess(Construct):
    def __init__(
        self, scope: Construct, id: str, *, cluster_name: str, reconciler: iam.IRole, api: iam.IRole
    ) -> None:
        super().__init__(scope, id)
        self.entries = [
            eks.CfnAccessEntry(
                self,
                name,
                cluster_name=cluster_name,
                principal_arn=role.role_arn,
                kubernetes_groups=[group],
                type="STANDARD",
            )
            for name, role, group in (("Reconciler", reconciler, RECONCILER_GROUP), ("Api", api, API_GROUP))
        ]
