"""``cdk deploy`` rehearsed offline: the real CDK CLI against the local AWS emulator, the deployed
stack read back through the services' own APIs, and least privilege observed (``make rehearse``;
``tests/rehearse`` drives it).

* :class:`Emulator` — the moto server with the project's extensions (a subprocess, real HTTP): IAM
  enforcement switched on and off (``/moto-api/reset-auth``), the record of IAM decisions, the EKS
  cluster registered with a real endpoint.
* :class:`Cdk` — ``node_modules/.bin/cdk`` with ``AWS_ENDPOINT_URL`` set to the emulator, nothing else
  changed: ``synth``, ``bootstrap``, ``deploy``, ``destroy``.
* :func:`stack_state` — resources (type, physical id), outputs and template of a deployed stack.
* :class:`FunctionRuntime` — a deployed function's environment as Lambda gives it: its
  ``Environment.Variables``, the region, and credentials of its own role (``sts:AssumeRole``, as
  the Lambda service does; the role's trust policy is checked to name ``lambda.amazonaws.com``), its
  code package from the deployment's asset bucket unpacked as ``/var/task`` (paths under
  ``/var/task`` in the environment point there). Two things are not Lambda's: ``AWS_ENDPOINT_URL``
  (the emulator) and Powertools' tracing switched off (no X-Ray daemon here).
* :func:`least_privilege` — per role: each (action, resource) its policies grant, which of them the
  recorded decisions used, and every call denied.
* :func:`rbac_comparison` — per Kubernetes group of ``deploy/rbac.yaml``: each rule against the
  requests the API server's audit log recorded for that group (``impersonatedUser`` of the EKS
  endpoint's requests, :mod:`topogov_local.eks_endpoint`).
"""

from topogov_local.rehearse.cdk import ASSET_CACHE, ASSETS_KEPT, Cdk, CdkRun, keep_assets, seed_assets
from topogov_local.rehearse.emulator import (
    ACCOUNT,
    CDK,
    RBAC_MANIFEST,
    REGION,
    ROOT,
    STACK,
    TASK_ROOT,
    Emulator,
    RehearsalError,
    wait_for,
)
from topogov_local.rehearse.privilege import (
    Grant,
    RbacRule,
    RoleReport,
    audit_events,
    least_privilege,
    rbac_comparison,
    rbac_rules,
    role_grants,
)
from topogov_local.rehearse.state import (
    Clients,
    FunctionRuntime,
    StackState,
    deployed_compression,
    deployed_routes,
    function_runtime,
    lambda_environ,
    resource_exists,
    stack_state,
)

__all__ = [
    "ACCOUNT",
    "ASSETS_KEPT",
    "ASSET_CACHE",
    "CDK",
    "RBAC_MANIFEST",
    "REGION",
    "ROOT",
    "STACK",
    "TASK_ROOT",
    "Cdk",
    "CdkRun",
    "Clients",
    "Emulator",
    "FunctionRuntime",
    "Grant",
    "RbacRule",
    "RehearsalError",
    "RoleReport",
    "StackState",
    "audit_events",
    "deployed_compression",
    "deployed_routes",
    "function_runtime",
    "keep_assets",
    "lambda_environ",
    "least_privilege",
    "rbac_comparison",
    "rbac_rules",
    "resource_exists",
    "role_grants",
    "seed_assets",
    "stack_state",
    "wait_for",
]
