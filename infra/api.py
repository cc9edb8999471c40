"""The API: a REST API with IAM auth on every method, request validation, throttling, access logs
and tracing, in front of the api function (Lambda proxy integration)."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Duration, Size, Stack
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.config import DeployConfig
from infra.functions import FunctionContext, FunctionSpec, TopogovFunction
from infra.names import POLICY_PATH, SNAPSHOT_KEY
from topogov.adapters.tables import LIVE_INDEX
from topogov.settings import ApiSettings

STAGE = "prod"
# API Gateway gzips (or deflates) an answer of at least this many bytes for a client that asks with
# Accept-Encoding ("Payload compression for REST APIs", API Gateway Developer Guide): the fleet map
# of 10,000 nodes is 1.9 MB of JSON and about 80 kB gzipped. Below 1 KiB compression saves little.
MIN_COMPRESSION_BYTES = 1024
ACCESS_LOG_FORMAT = apigw.AccessLogFormat.json_with_standard_fields(
    caller=True,
    http_method=True,
    ip=True,
    protocol=True,
    request_time=True,
    resource_path=True,
    response_length=True,
    status=True,
    user=True,
)


class Api(Construct):
    def __init__(
        self, scope: Construct, id: str, *, context: FunctionContext, principal_roles: Sequence[str] = ()
    ) -> None:
        super().__init__(scope, id)
        config, storage = context.config, context.storage
        self.principal_roles = tuple(principal_roles)
        settings = ApiSettings(
            cluster_name=config.cluster_name,
            policy_file=POLICY_PATH,
            snapshot_bucket=storage.snapshot_bucket.bucket_name,
            snapshot_key=SNAPSHOT_KEY,
            ledger_table=storage.ledger.table_name,
            counters_table=storage.counters.table_name,
            idempotency_table=storage.idempotency.table_name,
            # HyperPod mode (domain/hyperpod/mode.py): -c topogov:hyperpodClusterArn
            hyperpod_cluster_arn=config.hyperpod_cluster_arn,
        )
        self.settings = settings
        self.fn = TopogovFunction(
            self,
            "Handler",
            spec=FunctionSpec(
                "api",
                "topogov.handlers.api.handler",
                Duration.seconds(29),
                1024,
                settings.to_env(),
                # A bound on what the API may take of the account's concurrency (stage throttling bounds
                # the rate, not how many requests wait on a slow Kubernetes API at once).
                # 0 reserves none: an account whose limit leaves no room (Lambda keeps 100 unreserved;
                # a new account's limit can be 10) can deploy (topogov preflight says which applies).
                reserved_concurrency=config.api_reserved_concurrency or None,
                # A cold start restores a snapshot taken after topogov.handlers.snapstart primed the
                # imports and clients (the hooks keep credentials, seeds and connections out of it).
                snap_start=True,
            ),
            context=context,
        )
        self._grant(context)
        if principal_roles:
            # A caller's role path, which its session's ARN lacks (domain/policy/arn.py,
            # logic/identity.py): GetRole of exactly the roles the policy's role patterns name (IAM
            # matches a GetRole's role ARN, path included, against them), so a role no pattern names
            # is not even readable.
            self.fn.role.add_to_policy(
                iam.PolicyStatement(
                    sid="CallersRolePaths", actions=["iam:GetRole"], resources=list(principal_roles)
                )
            )
        self.rest_api = self._rest_api(context)
        self.url = self.rest_api.url

    def _grant(self, context: FunctionContext) -> None:
        """What the function calls, each statement named (least privilege: tests/rehearse observes
        the calls made under this role)."""
        config, storage = context.config, context.storage
        role = self.fn.role
        self.fn.allow_describe_cluster(config.cluster_name)
        role.add_to_policy(
            iam.PolicyStatement(
                sid="ReadTopologySnapshot",
                actions=["s3:GetObject"],
                resources=[storage.snapshot_bucket.arn_for_objects(SNAPSHOT_KEY)],
            )
        )
        role.add_to_policy(storage.snapshot_existence_statement())
        # Each table gets the actions the API makes on it (observed by tests/rehearse under this role):
        # the charge is an UpdateItem of the team's counters beside a PutItem of the job's record in
        # one transaction, a refund an UpdateItem beside a DeleteItem; records are read and listed
        # (GetItem, Query), counters only read (GetItem).
        role.add_to_policy(
            iam.PolicyStatement(
                sid="Ledger",
                actions=[
                    "dynamodb:GetItem",
                    "dynamodb:Query",
                    "dynamodb:PutItem",
                    "dynamodb:UpdateItem",
                    "dynamodb:DeleteItem",
                ],
                resources=[storage.ledger.table_arn],
            )
        )
        # The estimates read the live records through the ledger's sparse index (adapters/tables.py).
        role.add_to_policy(
            iam.PolicyStatement(
                sid="LiveRecords",
                actions=["dynamodb:Query"],
                resources=[f"{storage.ledger.table_arn}/index/{LIVE_INDEX.name}"],
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="Counters",
                actions=["dynamodb:GetItem", "dynamodb:UpdateItem"],
                resources=[storage.counters.table_arn],
            )
        )
        # Powertools' idempotency: PutItem (in progress, conditional; a replay's record comes back
        # with the refusal), UpdateItem (completed), DeleteItem (the handler raised: the key may be
        # retried). Its GetItem fallback runs only when a refused put carries no item, which DynamoDB
        # always returns (ReturnValuesOnConditionCheckFailure=ALL_OLD): not granted.
        role.add_to_policy(
            iam.PolicyStatement(
                sid="Idempotency",
                actions=["dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"],
                resources=[storage.idempotency.table_arn],
            )
        )

    def _rest_api(self, context: FunctionContext) -> apigw.RestApi:
        """The REST API: IAM auth on every method, a resource policy, a stage with throttling,
        tracing and access logs, and one method per route of the application."""
        config = context.config
        self.access_logs = logs.LogGroup(self, "AccessLogs", retention=context.log_retention)
        resource_policy = iam.PolicyDocument(statements=caller_statements(Stack.of(self), config))
        method_throttle = apigw.MethodDeploymentOptions(
            throttling_rate_limit=config.submit_rate_limit, throttling_burst_limit=config.submit_burst_limit
        )
        rest_api = apigw.RestApi(
            self,
            "RestApi",
            # Named per stack: API Gateway's metrics are by ApiName, so the alarms and the dashboard
            # (which read them by name) count this API only, not any other API named "RestApi".
            rest_api_name=f"{Stack.of(self).stack_name}-api",
            description="Topogov: topology-aware task governance",
            policy=resource_policy,
            # API Gateway's CloudWatch role is one per account and region: creating it replaces the
            # one the account has. Opt-in (topogov:apiGatewayCloudWatchRole); see the README.
            cloud_watch_role=config.api_gateway_cloud_watch_role,
            deploy_options=apigw.StageOptions(
                stage_name=STAGE,
                tracing_enabled=True,
                logging_level=apigw.MethodLoggingLevel.ERROR,
                metrics_enabled=True,
                throttling_rate_limit=config.api_rate_limit,
                throttling_burst_limit=config.api_burst_limit,
                method_options={"/v1/jobs/POST": method_throttle},
                access_log_destination=apigw.LogGroupLogDestination(self.access_logs),
                access_log_format=ACCESS_LOG_FORMAT,
            ),
            default_method_options=apigw.MethodOptions(authorization_type=apigw.AuthorizationType.IAM),
            endpoint_types=[apigw.EndpointType.REGIONAL],
            min_compression_size=Size.bytes(MIN_COMPRESSION_BYTES),
        )
        validator = rest_api.add_request_validator(
            "Validator", validate_request_body=True, validate_request_parameters=True
        )
        # The alias, never $LATEST: only a published version has the SnapStart snapshot.
        integration = apigw.LambdaIntegration(self.fn.target, proxy=True, allow_test_invoke=False)
        from topogov.handlers.api import routes  # the application's routes, not a copy

        for path, methods in routes().items():
            resource = rest_api.root.resource_for_path(path)
            for method in methods:
                params = {f"method.request.path.{p}": True for p in ("team", "name") if "{" + p + "}" in path}
                resource.add_method(
                    method,
                    integration,
                    authorization_type=apigw.AuthorizationType.IAM,
                    request_validator=validator,
                    request_parameters=params or None,
                )
        return rest_api


def caller_statements(stack: Stack, config: DeployConfig) -> list[iam.PolicyStatement]:
    """Who may call at all, before IAM auth and the handler's team check.

    API Gateway with IAM auth and a resource policy (API Gateway Developer Guide, "How API Gateway
    resource policies affect authorization workflow"): a caller of the API's own account gets in when
    its IAM policy *or* the resource policy allows it (no explicit deny); a caller of another account
    needs both. So the policy only denies: principals outside this account (or outside the
    organisation, by context); a same-account caller then needs an IAM grant of
    ``execute-api:Invoke`` of its own (an allow here would let every principal of the account in
    without one). In organisation mode, principals of the organisation's other accounts get the
    resource policy's allow they need, and still their own IAM grant."""
    invoke_any = stack.format_arn(service="execute-api", resource="*")
    if not config.api_organization_id:
        return [
            iam.PolicyStatement(
                sid="DenyOutsideThisAccount",
                effect=iam.Effect.DENY,
                principals=[iam.AnyPrincipal()],
                actions=["execute-api:Invoke"],
                resources=[invoke_any],
                conditions={"StringNotEquals": {"aws:PrincipalAccount": stack.account}},
            )
        ]
    org = config.api_organization_id
    return [
        iam.PolicyStatement(
            sid="DenyOutsideTheOrganization",
            effect=iam.Effect.DENY,
            principals=[iam.AnyPrincipal()],
            actions=["execute-api:Invoke"],
            resources=[invoke_any],
            conditions={"StringNotEquals": {"aws:PrincipalOrgID": org}},
        ),
        iam.PolicyStatement(
            sid="OtherAccountsOfTheOrganization",
            principals=[iam.AnyPrincipal()],
            actions=["execute-api:Invoke"],
            resources=[invoke_any],
            conditions={
                "StringEquals": {"aws:PrincipalOrgID": org},
                "StringNotEquals": {"aws:PrincipalAccount": stack.account},
            },
        ),
    ]
