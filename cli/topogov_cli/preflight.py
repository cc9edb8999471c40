"""``topogov preflight``: will ``cdk deploy`` work here, and will the stack work once deployed? Run it
before the deploy, with the deployer's credentials (the AWS chain; ``--profile``, ``--region``; the
endpoint from ``AWS_ENDPOINT_URL``, as boto3 reads it) and the deploy's context (``cdk.json``'s
``context``, then ``-c topogov:key=value`` as the CDK CLI takes them). One line per check in
`topogov doctor`'s format, each failing one saying the fix; exit 0 when all pass, 1 when one fails,
2 for a bad flag or context value, 3 when AWS cannot be reached or the credentials are refused.

The context is read here, not through ``infra/config.py``: the CLI distribution depends on the
``topogov`` package only, never on the CDK app (docs/architecture.md). Its defaults are the
``DeployConfig`` fields' (a test keeps them equal); the Region lists are ``topogov.domain.regions``,
the same module the app refuses Regions with at synth.
"""

from __future__ import annotations

import argparse
import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from topogov.domain.kueue_version import KueueVersion, release_of_image
from topogov_cli.common import EXIT_UNREACHABLE, command, guarded, usage
from topogov_cli.doctor import Check, print_checks

PREFIX = "topogov:"
STACK = "Topogov"  # app.py's stack name
EXAMPLE_ACCOUNTS = ("111122223333", "123456789012")  # AWS's documentation example, the local stack's
# Lambda keeps at least this many concurrent executions unreserved (Lambda Developer Guide, "Configuring
# reserved concurrency": https://docs.aws.amazon.com/lambda/latest/dg/configuration-concurrency.html).
UNRESERVED_MINIMUM = 100
BOOTSTRAP_PARAMETER = (
    "/cdk-bootstrap/hnb659fds/version"  # the default qualifier's (CDK's bootstrapping guide)
)
BOOTSTRAP_MINIMUM = 6  # the version a modern synthesizer's template asserts (its BootstrapVersion rule)
# The Kueue objects the governor writes, by their API resource names (domain/kueue.py renders them).
KUEUE_RESOURCES = (
    "topologies",
    "resourceflavors",
    "cohorts",
    "clusterqueues",
    "localqueues",
    "workloadpriorityclasses",
)
KUEUE_API_VERSIONS = ("v1beta1", "v1beta2")  # domain/kueue.py's ApiVersion
KUEUE_FOLLOWED = (0, 17, 0)  # the release Topogov's Kueue rules cite (docs/architecture.md)
TAS_DEFAULT_ON = (0, 14, 0)  # TopologyAwareScheduling is Beta, on by default, from v0.14 (kube_features.go)
# What the functions call from inside a VPC (bootstrap.py's clients): EKS DescribeCluster, EC2
# DescribeInstanceTopology, S3 (the snapshot), DynamoDB (ledger, counters, idempotency). Without a NAT
# gateway each needs a VPC endpoint (interface; gateway for S3 and DynamoDB): Lambda Developer Guide,
# "Enable internet access for VPC-connected Lambda functions" (configuration-vpc-internet.html). The EKS
# token is presigned, not sent (EKS calls STS); logs and EMF metrics leave through Lambda itself.
VPC_SERVICES = ("eks", "ec2", "s3", "dynamodb")


PREFLIGHT_EXITS = """preflight exits 0 when every check passes, 1 when one fails (each says its fix), 2 for a
  bad flag or context value (no cluster, no Region), 3 when AWS refuses the credentials or cannot
  be reached. Context: cdk.json's "context", cdk.context.json, then -c (as `cdk deploy`); the AWS
  endpoint: boto3's (AWS_ENDPOINT_URL for an emulator)."""


@dataclass(frozen=True)
class Context:
    """What of the deploy's context the checks need, with ``DeployConfig``'s defaults."""

    cluster_name: str | None = None
    region: str | None = None
    account: str | None = None
    policy_file: str = "teams.yaml"
    vpc_id: str | None = None
    subnet_ids: tuple[str, ...] = ()
    security_group_id: str | None = None
    api_reserved_concurrency: int = 25
    kueue_api_version: str | None = None  # None: discovered (v1beta2 where served, adapters/kueue_api.py)
    api_gateway_cloud_watch_role: bool = False
    hyperpod_cluster_arn: str | None = None  # a SageMaker HyperPod cluster: its checks (preflight_hyperpod)

    @property
    def in_vpc(self) -> bool:
        return bool(self.vpc_id or self.subnet_ids or self.security_group_id)


def add_parser(sub: Any) -> None:
    p = command(
        sub,
        "preflight",
        "before `cdk deploy`: check the account, the Region and the cluster the stack needs",
        "Check, with the deployer's credentials and the deploy's context (cdk.json, then -c), what "
        "`cdk deploy` and the first passes need: the Region (DescribeInstanceTopology and SnapStart), "
        "the CDK bootstrap, the Lambda concurrency the stack reserves against the account's limit, API "
        "Gateway's CloudWatch role, the cluster's authentication mode and endpoint access against where "
        "the functions run, access entries the stack would collide with, Kueue (installed, version, "
        "topology-aware scheduling, the API version the governor writes) and teams.yaml principals "
        "that are still example accounts. Each failing check says the fix.",
        extra=PREFLIGHT_EXITS,
    )
    p.add_argument(
        "--cluster", metavar="NAME", help="the EKS cluster (default: the topogov:clusterName context)"
    )
    p.add_argument(
        "-c",
        "--context",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a context value as `cdk deploy -c` takes it (topogov:key=value), over cdk.json's",
    )
    p.add_argument("--app", default=".", metavar="DIR", help="where cdk.json is (default: here)")
    p.add_argument(
        "--kubeconfig",
        metavar="PATH",
        help="reach Kubernetes with this kubeconfig (default: as the functions do, an EKS token of your "
        "credentials)",
    )
    p.add_argument(
        "--region", metavar="REGION", help="default: the topogov:region context, then the AWS chain's"
    )
    p.add_argument("--profile", metavar="PROFILE", help="AWS profile (default: $AWS_PROFILE)")
    p.set_defaults(func=guarded(run))


# -- the context --------------------------------------------------------------------------------------
def read_context(app_dir: Path, pairs: list[str]) -> Context:
    """cdk.json's ``context``, cdk.context.json's, then ``-c`` pairs (later wins, as the CDK CLI)."""
    raw: dict[str, Any] = {}
    for name in ("cdk.json", "cdk.context.json"):
        path = app_dir / name
        if path.exists():
            try:
                doc = json.loads(path.read_text(encoding="utf-8"))
            except ValueError as exc:
                raise usage(f"{path}: not JSON: {exc}") from None
            raw.update(doc.get("context") or {} if name == "cdk.json" else doc)
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise usage(f"-c {pair}: give KEY=VALUE (e.g. -c topogov:clusterName=my-cluster)")
        raw[key] = value
    return _context(raw)


def _context(raw: Mapping[str, Any]) -> Context:
    def get(camel: str) -> Any:
        value = raw.get(PREFIX + camel)
        return None if value in (None, "") else value

    subnets = get("subnetIds") or ()
    if isinstance(subnets, str):
        subnets = tuple(s.strip() for s in subnets.split(",") if s.strip())
    reserved = get("apiReservedConcurrency")
    if reserved is not None and not re.fullmatch(r"\d+", str(reserved)):
        raise usage(f"{PREFIX}apiReservedConcurrency: {reserved!r} is not a whole number (0 reserves none)")
    kueue = get("kueueApiVersion")
    if kueue is not None and kueue not in KUEUE_API_VERSIONS:
        raise usage(
            f"{PREFIX}kueueApiVersion: {kueue!r} is not a version the governor writes "
            f"({', '.join(KUEUE_API_VERSIONS)})"
        )
    role = str(get("apiGatewayCloudWatchRole") or "false").lower()
    if role not in ("true", "false"):
        raise usage(f"{PREFIX}apiGatewayCloudWatchRole: {role!r} is neither true nor false")
    defaults = Context()
    return Context(
        cluster_name=get("clusterName"),
        region=get("region"),
        account=get("account"),
        policy_file=str(get("policyFile") or defaults.policy_file),
        vpc_id=get("vpcId"),
        subnet_ids=tuple(subnets),
        security_group_id=get("securityGroupId"),
        api_reserved_concurrency=int(reserved) if reserved is not None else defaults.api_reserved_concurrency,
        kueue_api_version=None if kueue is None else str(kueue),
        api_gateway_cloud_watch_role=role == "true",
        hyperpod_cluster_arn=get("hyperpodClusterArn"),
    )


# -- the run --------------------------------------------------------------------------------------------
class Aws:
    """boto3 clients of one session (the AWS chain, ``AWS_ENDPOINT_URL`` honoured), made once each."""

    def __init__(self, profile: str | None, region: str | None) -> None:
        import boto3
        from botocore.config import Config

        self.session = boto3.session.Session(profile_name=profile, region_name=region)
        if not self.session.region_name and os.environ.get("AWS_REGION"):  # boto3 reads AWS_DEFAULT_REGION
            self.session = boto3.session.Session(profile_name=profile, region_name=os.environ["AWS_REGION"])
        self.region = self.session.region_name
        self._config = Config(retries={"mode": "standard", "total_max_attempts": 3}, connect_timeout=10)
        self._clients: dict[str, Any] = {}

    def __call__(self, service: str) -> Any:
        if service not in self._clients:
            self._clients[service] = self.session.client(service, config=self._config)
        return self._clients[service]


def run(args: argparse.Namespace) -> int:
    from botocore.exceptions import BotoCoreError, ClientError, ProfileNotFound

    ctx = read_context(Path(args.app), args.context)
    cluster = args.cluster or ctx.cluster_name
    if not cluster:
        raise usage("no cluster: --cluster NAME, or the topogov:clusterName context (cdk.json or -c)")
    try:
        aws = Aws(args.profile, args.region or ctx.region)
    except ProfileNotFound as exc:
        raise usage(str(exc)) from None
    if not aws.region:
        raise usage(
            "no Region: --region, the topogov:region context, AWS_REGION, AWS_DEFAULT_REGION or the profile's"
        )
    checks: list[Check] = [region_check(aws.region)]
    try:
        who = aws("sts").get_caller_identity()
        checks.append(credentials_check(aws, ctx, who))
    except (BotoCoreError, ClientError) as exc:
        checks.append(("credentials", False, f"{_error(exc)} — configure the AWS chain (--profile, AWS_*)"))
        print_checks(checks)
        return EXIT_UNREACHABLE
    checks.append(_guard("CDK bootstrap", bootstrap_check, aws, who["Account"]))
    checks.append(_guard("Lambda concurrency", concurrency_check, aws, ctx))
    checks.append(_guard("API Gateway logging role", cloudwatch_role_check, aws, ctx))
    checks.extend(cluster_checks(aws, ctx, cluster, args.kubeconfig, _policy(Path(args.app), ctx)))
    checks.extend(policy_checks(Path(args.app), ctx))
    checks.append(_guard("direct invocation", _api_function_check, aws))
    return print_checks(checks)


def _policy(app_dir: Path, ctx: Context) -> Any:
    """The deploy's team policy, or None when it does not load (``policy_checks`` says why)."""
    from topogov.domain.policy import PolicyError, load_policy_file

    path = Path(ctx.policy_file)
    try:
        return load_policy_file(path if path.is_absolute() else app_dir / path)
    except (PolicyError, OSError):
        return None


def _api_function_check(aws: Aws) -> Check:
    """Who may invoke the deployed api function directly (``preflight_pods.direct_invoke_check``)."""
    from topogov_cli.preflight_pods import direct_invoke_check

    state = stack_state(aws)
    names = [
        r["PhysicalResourceId"]
        for r in (state[1] if state else [])
        if r["ResourceType"] == "AWS::Lambda::Function" and r["LogicalResourceId"].startswith("ApiHandler")
    ]
    if not names:
        return ("direct invocation", True, "the api function is not deployed yet: checked after the deploy")
    arn = aws("lambda").get_function(FunctionName=names[0])["Configuration"]["FunctionArn"]
    return direct_invoke_check(aws, arn)


def _guard(what: str, check: Callable[..., Check], *args: Any) -> Check:
    """A check whose AWS call failed is a failing line naming the call's error, not a traceback."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        return check(*args)
    except (BotoCoreError, ClientError) as exc:
        return (what, False, _error(exc))


def _error(exc: Exception) -> str:
    from botocore.exceptions import ClientError

    if isinstance(exc, ClientError):
        err = exc.response.get("Error") or {}
        return f"{exc.operation_name}: {err.get('Code')}: {err.get('Message')}"
    return f"{type(exc).__name__}: {exc}"


def _code(exc: Exception) -> str:
    return str((getattr(exc, "response", None) or {}).get("Error", {}).get("Code", ""))


# -- AWS account and Region ------------------------------------------------------------------------------
def region_check(region: str) -> Check:
    from topogov.domain.regions import supported_list, unsupported

    missing = unsupported(region)
    if not missing:
        return ("region", True, f"{region}: DescribeInstanceTopology and Lambda SnapStart exist here")
    return ("region", False, "; ".join(missing) + f" — deploy to one of: {supported_list()}")


def credentials_check(aws: Aws, ctx: Context, who: Mapping[str, str]) -> Check:
    if ctx.account and ctx.account != who["Account"]:
        return (
            "credentials",
            False,
            f"{who['Arn']} is in account {who['Account']}, the topogov:account context names {ctx.account} "
            "— use that account's credentials (--profile) or fix the context",
        )
    return ("credentials", True, f"{who['Arn']} (account {who['Account']}, {aws.region})")


def bootstrap_check(aws: Aws, account: str) -> Check:
    """The CDK bootstrap stack: its version parameter (what the template's BootstrapVersion rule reads),
    else the CDKToolkit stack."""
    from botocore.exceptions import ClientError

    fix = f"run: npx cdk bootstrap aws://{account}/{aws.region}"
    try:
        raw = str(aws("ssm").get_parameter(Name=BOOTSTRAP_PARAMETER)["Parameter"]["Value"])
    except ClientError as exc:
        if _code(exc) != "ParameterNotFound":
            raise
        raw = ""
    version = int(raw) if raw.isdigit() else None
    if version is None:
        try:
            aws("cloudformation").describe_stacks(StackName="CDKToolkit")
        except ClientError as exc:
            if _code(exc) != "ValidationError":
                raise
            return ("CDK bootstrap", False, f"not bootstrapped ({BOOTSTRAP_PARAMETER} absent) — {fix}")
        return ("CDK bootstrap", False, f"CDKToolkit exists but {BOOTSTRAP_PARAMETER} does not — {fix}")
    if version < BOOTSTRAP_MINIMUM:
        return ("CDK bootstrap", False, f"version {version}, the template needs {BOOTSTRAP_MINIMUM} — {fix}")
    return ("CDK bootstrap", True, f"version {version} ({BOOTSTRAP_PARAMETER})")


def stack_state(aws: Aws) -> tuple[dict[str, str], list[dict[str, Any]]] | None:
    """The deployed stack's outputs and resources, or None before its first deploy."""
    cfn = aws("cloudformation")
    from botocore.exceptions import ClientError

    try:
        stack = cfn.describe_stacks(StackName=STACK)["Stacks"][0]
    except ClientError as exc:
        if _code(exc) == "ValidationError":  # "Stack with id Topogov does not exist"
            return None
        raise
    outputs = {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs") or []}
    resources: list[dict[str, Any]] = []
    for page in cfn.get_paginator("list_stack_resources").paginate(StackName=STACK):
        resources.extend(page["StackResourceSummaries"])
    return outputs, resources


def concurrency_check(aws: Aws, ctx: Context) -> Check:
    """What the stack reserves (the API's ``apiReservedConcurrency``; reconcile reserves nothing) against
    the account's limit, keeping Lambda's minimum unreserved. The stack's own current reservations are
    freed by the update, so they count as available."""
    lam = aws("lambda")
    limit = lam.get_account_settings()["AccountLimit"]
    total, unreserved = int(limit["ConcurrentExecutions"]), int(limit["UnreservedConcurrentExecutions"])
    want = ctx.api_reserved_concurrency
    ours = 0
    state = stack_state(aws)
    for res in state[1] if state else ():
        if res["ResourceType"] == "AWS::Lambda::Function" and res.get("PhysicalResourceId"):
            got = lam.get_function_concurrency(FunctionName=res["PhysicalResourceId"])
            ours += int(got.get("ReservedConcurrentExecutions") or 0)
    left = unreserved + ours - want
    minimum = min(total, UNRESERVED_MINIMUM)  # below 100 the whole limit stays unreserved
    what = f"account limit {total}, {total - unreserved - ours} reserved by other functions"
    if want == 0:
        return ("Lambda concurrency", True, f"{what}; the stack reserves none (apiReservedConcurrency=0)")
    if left >= minimum:
        return ("Lambda concurrency", True, f"{what}; reserving {want} leaves {left} unreserved")
    most = unreserved + ours - minimum
    fits = f"at most {most}, " if most > 0 else ""
    return (
        "Lambda concurrency",
        False,
        f"{what}: reserving {want} for the API leaves {left} unreserved, Lambda keeps at least "
        f"{minimum} — deploy with -c {PREFIX}apiReservedConcurrency=0 (none) or {fits}or ask "
        "for a higher limit (Service Quotas, AWS Lambda, Concurrent executions)",
    )


def cloudwatch_role_check(aws: Aws, ctx: Context) -> Check:
    """API Gateway writes the stage's logs with the account's CloudWatch role; without one CloudFormation
    fails the stage ("CloudWatch Logs role ARN must be set in account settings to enable logging")."""
    if ctx.api_gateway_cloud_watch_role:
        return (
            "API Gateway logging role",
            True,
            f"the stack sets it ({PREFIX}apiGatewayCloudWatchRole=true)",
        )
    arn = aws("apigateway").get_account().get("cloudwatchRoleArn")
    if arn:
        return ("API Gateway logging role", True, arn)
    return (
        "API Gateway logging role",
        False,
        f"the account has no CloudWatch role for API Gateway — deploy once with -c "
        f"{PREFIX}apiGatewayCloudWatchRole=true, or set one: aws apigateway update-account "
        "--patch-operations op=replace,path=/cloudwatchRoleArn,value=ROLE_ARN",
    )


# -- the cluster -----------------------------------------------------------------------------------------
def cluster_checks(
    aws: Aws, ctx: Context, name: str, kubeconfig: str | None, policy: Any = None
) -> list[Check]:
    try:
        cluster = aws("eks").describe_cluster(name=name)["cluster"]
    except Exception as exc:
        if _code(exc) == "ResourceNotFoundException":
            fix = (
                f"give --cluster or -c {PREFIX}clusterName=NAME (aws eks list-clusters --region {aws.region})"
            )
            return [("cluster", False, f"no EKS cluster {name!r} in {aws.region} — {fix}")]
        return [("cluster", False, _error(exc))]
    checks = [
        (
            "cluster",
            True,
            f"{name} (Kubernetes {cluster.get('version') or '?'}, {cluster.get('status') or '?'})",
        ),
        auth_mode_check(cluster, name),
        *endpoint_checks(aws, ctx, cluster),
        _guard("access entries", access_entries_check, aws, name),
    ]
    return checks + kueue_checks(aws, ctx, name, cluster, kubeconfig, policy)


def auth_mode_check(cluster: Mapping[str, Any], name: str) -> Check:
    from topogov.adapters.kube_auth import ACCESS_ENTRY_MODES

    mode = (cluster.get("accessConfig") or {}).get("authenticationMode")
    if mode in ACCESS_ENTRY_MODES:
        return ("authentication mode", True, f"{mode}: the stack's access entries are honoured")
    return (
        "authentication mode",
        False,
        f"{mode or 'not reported'}: the stack grants its roles access with access entries, which need API "
        f"or API_AND_CONFIG_MAP — run: aws eks update-cluster-config --name {name} "
        "--access-config authenticationMode=API_AND_CONFIG_MAP",
    )


def endpoint_checks(aws: Aws, ctx: Context, cluster: Mapping[str, Any]) -> list[Check]:
    """Where the functions run against how the endpoint is reachable (EKS User Guide, "Cluster API
    server endpoint": cluster-endpoint.html). Outside a VPC a Lambda function's address is none of
    yours, so only a public endpoint open to 0.0.0.0/0 reaches it."""
    vpc = cluster.get("resourcesVpcConfig") or {}
    public = vpc.get("endpointPublicAccess", True)  # CreateCluster's defaults
    private = vpc.get("endpointPrivateAccess", False)
    cidrs = list(vpc.get("publicAccessCidrs") or ["0.0.0.0/0"])
    opened = "0.0.0.0/0" in cidrs
    shown = f"public {','.join(cidrs) if public else 'off'}, private {'on' if private else 'off'}"
    if not ctx.in_vpc:
        if public and opened:
            return [("endpoint access", True, f"{shown}; the functions run outside a VPC and reach it")]
        return [("endpoint access", False, f"{shown}: {OUTSIDE_VPC_FIX}")]
    return [
        _vpc_endpoint_check(ctx, vpc, shown, private=private, opened=public and opened),
        _guard("VPC egress", vpc_egress_check, aws, ctx),
    ]


OUTSIDE_VPC_FIX = (
    "the functions run outside a VPC, where no address of theirs is in publicAccessCidrs — deploy them "
    f"into the cluster's VPC (-c {PREFIX}vpcId=... -c {PREFIX}subnetIds=... -c {PREFIX}securityGroupId=..., "
    "subnets with a NAT or VPC endpoints), or open the public endpoint to 0.0.0.0/0"
)


def _vpc_endpoint_check(
    ctx: Context, vpc: Mapping[str, Any], shown: str, *, private: bool, opened: bool
) -> Check:
    if vpc.get("vpcId") and ctx.vpc_id != vpc["vpcId"]:
        fix = f"give {PREFIX}vpcId={vpc['vpcId']} and its subnets"
        return (
            "endpoint access",
            False,
            f"{PREFIX}vpcId is {ctx.vpc_id}, the cluster is in {vpc['vpcId']} — {fix}",
        )
    if private:
        return ("endpoint access", True, f"{shown}; the functions run in {ctx.vpc_id}")
    if opened:
        return ("endpoint access", True, f"{shown}; the functions reach it through the VPC's NAT")
    return (
        "endpoint access",
        False,
        f"{shown}: from {ctx.vpc_id} only through a NAT whose address publicAccessCidrs lists — turn on "
        "private access (aws eks update-cluster-config --resources-vpc-config endpointPrivateAccess=true) "
        "or add the NAT's address",
    )


def vpc_egress_check(aws: Aws, ctx: Context) -> Check:
    """In a VPC the functions reach AWS through a NAT gateway or a VPC endpoint per service."""
    ec2 = aws("ec2")
    filters = [{"Name": "vpc-id", "Values": [ctx.vpc_id]}]
    nats = ec2.describe_nat_gateways(Filter=[*filters, {"Name": "state", "Values": ["available"]}])
    public = [n for n in nats.get("NatGateways") or [] if n.get("ConnectivityType", "public") == "public"]
    if public:  # a private NAT gateway reaches no public endpoint
        return (
            "VPC egress",
            True,
            f"NAT gateway {public[0]['NatGatewayId']} in {ctx.vpc_id} (route the functions' subnets to it)",
        )
    have = {e["ServiceName"] for e in ec2.describe_vpc_endpoints(Filters=filters).get("VpcEndpoints") or []}
    missing = [s for s in VPC_SERVICES if f"com.amazonaws.{aws.region}.{s}" not in have]
    if not missing:
        return ("VPC egress", True, f"VPC endpoints for {', '.join(VPC_SERVICES)} in {ctx.vpc_id}")
    return (
        "VPC egress",
        False,
        f"{ctx.vpc_id} has no public NAT gateway and no VPC endpoint for {', '.join(missing)} — the "
        "functions call them: route the subnets to a NAT gateway, or add those endpoints "
        f"(com.amazonaws.{aws.region}.SERVICE)",
    )


def access_entries_check(aws: Aws, cluster: str) -> Check:
    """An access entry CloudFormation did not create, for a role the stack creates one for, fails the
    deploy (CreateAccessEntry: ResourceInUseException). The roles are the deployed stack's outputs;
    before the first deploy they do not exist, so nothing can collide."""
    state = stack_state(aws)
    if state is None:
        return (
            "access entries",
            True,
            f"stack {STACK} not deployed yet: its roles are new, no entry can exist",
        )
    outputs, resources = state
    roles = [outputs[k] for k in ("ReconcilerRoleArn", "ApiRoleArn") if outputs.get(k)]
    owned = {r.get("PhysicalResourceId") for r in resources if r["ResourceType"] == "AWS::EKS::AccessEntry"}
    eks = aws("eks")
    existing: set[str] = set()
    for page in eks.get_paginator("list_access_entries").paginate(clusterName=cluster):
        existing.update(page.get("accessEntries") or [])
    foreign = [arn for arn in roles if arn in existing and f"{cluster}|{arn}" not in owned]
    if not foreign:
        return ("access entries", True, f"none on {cluster} for the stack's roles but its own")
    cmds = "; ".join(
        f"aws eks delete-access-entry --cluster-name {cluster} --principal-arn {a}" for a in foreign
    )
    return (
        "access entries",
        False,
        f"{', '.join(foreign)} already has an access entry on {cluster} that the stack did not create: "
        f"CloudFormation would fail creating its own — delete it: {cmds}",
    )


# -- Kueue ----------------------------------------------------------------------------------------------
def kube_http(aws: Aws, name: str, cluster: Mapping[str, Any], kubeconfig: str | None) -> Any:
    """Kubernetes as the functions reach it (EKS endpoint and CA, a token of these credentials), or
    through ``--kubeconfig``."""
    import base64

    from topogov.adapters.kube import KubeHttp
    from topogov.adapters.kube_auth import (
        ClusterEndpoint,
        EksTokenSource,
        eks_api_client,
        kubeconfig_api_client,
    )

    if kubeconfig:
        return KubeHttp(kubeconfig_api_client(kubeconfig), max_attempts=2)
    endpoint = ClusterEndpoint(cluster["endpoint"], base64.b64decode(cluster["certificateAuthority"]["data"]))
    return KubeHttp(eks_api_client(endpoint, EksTokenSource(aws("sts"), name)), max_attempts=2)


def kueue_checks(
    aws: Aws, ctx: Context, name: str, cluster: Mapping[str, Any], kubeconfig: str | None, policy: Any = None
) -> list[Check]:
    from topogov.domain.labels import KUEUE_GROUP

    try:
        http = kube_http(aws, name, cluster, kubeconfig)
        group = http.request("GET", f"/apis/{KUEUE_GROUP}")
    except Exception as exc:  # no connection, a refused token, a bad kubeconfig: say which
        via = kubeconfig or "an EKS token of your credentials"
        return [
            (
                "Kueue",
                False,
                f"cannot reach Kubernetes ({via}): {type(exc).__name__}: {str(exc)[:160]} "
                "— give --kubeconfig, or an access entry for your principal",
            )
        ]
    if group.status == 404:
        return [
            (
                "Kueue",
                False,
                f"not installed (no {KUEUE_GROUP} API) — install Kueue "
                f"v{'.'.join(map(str, KUEUE_FOLLOWED))} (HyperPod task governance installs it)",
            )
        ]
    if group.status != 200:
        return [("Kueue", False, _unreached(group, name, kubeconfig))]
    served = [v["version"] for v in group.body.get("versions") or []]
    preferred = (group.body.get("preferredVersion") or {}).get("version")
    deployment = kueue_deployment(http)
    addon = None
    if deployment is None and ctx.hyperpod_cluster_arn:
        from topogov_cli.preflight_hyperpod import addon_version

        addon = addon_version(aws, name)
    found = kueue_release(deployment, addon)
    checks = [
        ("Kueue", True, f"installed: {KUEUE_GROUP} serves {', '.join(served)} (preferred {preferred})"),
        kueue_version_check(found, deployment is not None or addon is not None, preferred),
        ("Kueue model profile", True, found.profile()),
        tas_check(http, deployment, "v1beta2" if "v1beta2" in served else "v1beta1"),
        api_version_check(http, ctx.kueue_api_version, served),
    ]
    if ctx.hyperpod_cluster_arn:  # the task governance add-on, the nodes' labels, what the add-on wrote
        from topogov_cli.preflight_hyperpod import hyperpod_checks

        checks += hyperpod_checks(aws, ctx.hyperpod_cluster_arn, name, http)
    from topogov_cli.preflight_pods import device_plugin_check, namespace_labels_check

    checks.append(device_plugin_check(http))
    if policy is not None:
        checks.append(namespace_labels_check(http, policy))
    return checks


def _unreached(resp: Any, name: str, kubeconfig: str | None) -> str:
    """Why Kubernetes did not answer, and what to do: a 401 through the EKS token path is a principal
    with no access entry (EKS User Guide, access-entries.html)."""
    said = str((resp.body or {}).get("message") or "")[:160] if isinstance(resp.body, dict) else ""
    head = f"GET /apis/kueue.x-k8s.io: HTTP {resp.status}" + (f" ({said})" if said else "")
    if resp.status == 401 and not kubeconfig:
        return (
            f"{head}: your principal has no access entry on {name} — add one (aws eks create-access-entry "
            f"--cluster-name {name} --principal-arn YOUR_ARN) or give --kubeconfig"
        )
    return f"{head} — check that you can reach the cluster ({kubeconfig or 'EKS endpoint, EKS token'})"


def kueue_deployment(http: Any) -> dict[str, Any] | None:
    """Kueue's manager as its release manifests deploy it (config/default: ``kueue-controller-manager``
    in ``kueue-system``, labelled ``app.kubernetes.io/name: kueue``), or None (Kueue runs outside the
    cluster, as in the local stack, or you may not read Deployments)."""
    resp = http.request(
        "GET", "/apis/apps/v1/deployments", query={"labelSelector": "app.kubernetes.io/name=kueue"}
    )
    items = (resp.body or {}).get("items") or [] if resp.status == 200 else []
    if not items:
        resp = http.request(
            "GET", "/apis/apps/v1/namespaces/kueue-system/deployments/kueue-controller-manager"
        )
        items = [resp.body] if resp.status == 200 else []
    return items[0] if items else None


def _manager(deployment: Mapping[str, Any]) -> dict[str, Any]:
    containers = deployment["spec"]["template"]["spec"].get("containers") or [{}]
    return next((c for c in containers if c.get("name") == "manager"), containers[0])


def kueue_release(deployment: Mapping[str, Any] | None, addon_version: str | None) -> KueueVersion:
    """The Kueue release, as ``adapters/kueue_api.py`` learns it: the manager's image tag, else the
    task governance add-on's version (``domain/kueue_version.py`` ADDON_KUEUE), else unknown."""
    from topogov.domain.kueue_version import UNKNOWN, from_addon, from_image

    image = str(_manager(deployment).get("image") or "") if deployment is not None else ""
    found = from_image(image) if image else None
    if found is None and addon_version:
        found = from_addon(addon_version)
    if found is None and image:
        return KueueVersion(None, f"the Kueue Deployment's image {image}: no version in the tag")
    return found or UNKNOWN


def kueue_version_check(found: KueueVersion, seen: bool, preferred: str | None) -> Check:
    """The release, where it was learnt; failing below the release Topogov follows. Without a
    Deployment or an add-on version, what the API says (Kueue v0.16 made v1beta2 its preferred,
    stored version; v0.15 served it beside v1beta1)."""
    followed = "v" + ".".join(map(str, KUEUE_FOLLOWED))
    if not seen:
        since = "v0.16 or later" if preferred == "v1beta2" else "before v0.16"
        return (
            "Kueue version",
            preferred == "v1beta2",
            f"no Kueue Deployment in the cluster (a manager run outside it, or no right to read "
            f"kueue-system/kueue-controller-manager): by its API, {since}; Topogov follows {followed}",
        )
    if found.release is None:
        return ("Kueue version", True, f"unknown ({found.source}); Topogov follows {followed}")
    if found.release < KUEUE_FOLLOWED:
        return (
            "Kueue version",
            False,
            f"{found.shown} ({found.source}): Topogov follows {followed} — upgrade Kueue",
        )
    return ("Kueue version", True, f"{found.shown} ({found.source})")


def tas_check(http: Any, deployment: Mapping[str, Any] | None, api_version: str = "v1beta2") -> Check:
    """TopologyAwareScheduling: the manager's ``--feature-gates``, else its Configuration's
    ``featureGates`` (the ConfigMap ``kueue-manager-config``), else the release's default."""
    topologies = http.request("GET", f"/apis/kueue.x-k8s.io/{api_version}").body or {}
    if "topologies" not in {r.get("name") for r in topologies.get("resources") or []}:
        return (
            "topology-aware scheduling",
            False,
            "no Topology API: Kueue is older than v0.9 — upgrade Kueue",
        )
    gate: bool | None = None
    if deployment is not None:
        gate = _gate_from_args(_manager(deployment).get("args") or [])
        if gate is None:
            gate = _gate_from_config(http, deployment["metadata"].get("namespace") or "kueue-system")
    if gate is False:
        return (
            "topology-aware scheduling",
            False,
            "TopologyAwareScheduling=false — remove that feature gate "
            "(Kueue's --feature-gates or its Configuration's featureGates)",
        )
    if gate:
        return ("topology-aware scheduling", True, "TopologyAwareScheduling=true")
    version = release_of_image(str(_manager(deployment).get("image") or "")) if deployment else None
    if version is not None and version < TAS_DEFAULT_ON:
        return (
            "topology-aware scheduling",
            False,
            "off by default before Kueue v0.14 — set --feature-gates=TopologyAwareScheduling=true or upgrade",
        )
    where = "the gates are not visible (no Deployment)" if deployment is None else "no gate set"
    return ("topology-aware scheduling", True, f"on by default since Kueue v0.14; {where}")


def _gate_from_args(args: list[str]) -> bool | None:
    for arg in args:
        m = re.search(r"TopologyAwareScheduling=(true|false)", arg) if "feature-gates" in arg else None
        if m:
            return m.group(1) == "true"
    return None


def _gate_from_config(http: Any, namespace: str) -> bool | None:
    import yaml

    resp = http.request("GET", f"/api/v1/namespaces/{namespace}/configmaps/kueue-manager-config")
    if resp.status != 200:
        return None
    for text in (resp.body.get("data") or {}).values():
        try:
            gates = (yaml.safe_load(text) or {}).get("featureGates") or {}
        except (yaml.YAMLError, AttributeError):
            continue
        if "TopologyAwareScheduling" in gates:
            return bool(gates["TopologyAwareScheduling"])
    return None


def api_version_check(http: Any, configured: str | None, served: list[str]) -> Check:
    """Topogov reads and writes its Kueue objects at v1beta2 where served, else v1beta1
    (``adapters/kueue_api.py``), or at ``kueueApiVersion`` when set, which must then be served: each
    of the governor's resources must be there."""
    from topogov.domain.errors import ConfigError
    from topogov.domain.kueue_version import choose_api_version

    try:
        version = choose_api_version(tuple(served), configured)
    except ConfigError:
        return (
            "Kueue API version",
            False,
            f"{PREFIX}kueueApiVersion {configured} is not served (Kueue serves {', '.join(served)}) — "
            f"deploy without it (Topogov then uses {'v1beta2' if 'v1beta2' in served else 'v1beta1'})",
        )
    what = (
        f"{PREFIX}kueueApiVersion {version}"
        if configured
        else f"{version} (discovered: v1beta2 where served)"
    )
    names = {
        r.get("name")
        for r in (http.request("GET", f"/apis/kueue.x-k8s.io/{version}").body or {}).get("resources") or []
    }
    missing = [r for r in KUEUE_RESOURCES if r not in names]
    if missing:
        return ("Kueue API version", False, f"{what}: no {', '.join(missing)} there — upgrade Kueue")
    return ("Kueue API version", True, f"{what}: served, with {', '.join(KUEUE_RESOURCES)}")


# -- the team policy -----------------------------------------------------------------------------------
def policy_checks(app_dir: Path, ctx: Context) -> list[Check]:
    """teams.yaml principals (and admins) that are still an example account, one failing line per team."""
    from topogov.domain.policy import PolicyError, load_policy_file

    path = Path(ctx.policy_file)
    path = path if path.is_absolute() else app_dir / path
    try:
        policy = load_policy_file(path)
    except (PolicyError, OSError) as exc:
        return [("teams.yaml", False, f"{path}: {exc} — fix it (topogov policy check {path})")]
    owners = {f"team {name}": team.principals for name, team in sorted(policy.teams.items())}
    owners["admins"] = policy.admins
    checks: list[Check] = []
    for who, principals in owners.items():
        examples = [p for p in principals if any(f":{a}:" in p for a in EXAMPLE_ACCOUNTS)]
        if examples:
            checks.append(
                (
                    f"teams.yaml {who}",
                    False,
                    f"still names example accounts ({' and '.join(EXAMPLE_ACCOUNTS)}): {', '.join(examples)} "
                    f"— put your principals in {path}",
                )
            )
    return checks or [("teams.yaml", True, f"{path}: {len(policy.teams)} teams, no example account")]
