"""The API: a REST API with IAM auth on every method, request validation, throttling, access logs
and tracing, in front of the api function (Lambda proxy integration)."""

from __future__ import annotations

from aws_cdk import Duration, Stack
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.functions import FunctionContext, FunctionSpec, TopogovFunction
from infra.names import POLICY_PATH, SNAPSHOT_KEY
from topogov.settings import ApiSettings

STAGE = "prod"


class Api(Construct):
    def __init__(self, scope: Construct, id: str, *, context: FunctionContext) -> None:
        super().__init__(scope, id)
        config, storage = context.config, context.storage
        settings = ApiSettings(
            cluster_name=config.cluster_name,
            policy_file=POLICY_PATH,
            snapshot_bucket=storage.snapshot_bucket.bucket_name,
            snapshot_key=SNAPSHOT_KEY,
            ledger_table=storage.ledger.table_name,
            counters_table=storage.counters.table_name,
            idempotency_table=storage.idempotency.table_name,
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
                reserved_concurrency=config.api_reserved_concurrency,
                # A cold start restores a snapshot taken after topogov.handlers.snapstart primed the
                # imports and clients (the hooks keep credentials, seeds and connections out of it).
                snap_start=True,
            ),
            context=context,
        )
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

        self.access_logs = logs.LogGroup(self, "AccessLogs", retention=context.log_retention)
        # Who may call at all, before IAM auth and the handler's team check: principals of this
        # account (or of the organisation, by context). Without it any SigV4 principal of any account
        # with an IAM allow for execute-api:Invoke reaches the function.
        caller_condition = (
            {"StringEquals": {"aws:PrincipalOrgID": config.api_organization_id}}
            if config.api_organization_id
            else {"StringEquals": {"aws:PrincipalAccount": Stack.of(self).account}}
        )
        invoke_any = Stack.of(self).format_arn(service="execute-api", resource="*")
        resource_policy = iam.PolicyDocument(
            statements=[
                iam.PolicyStatement(
                    sid="CallersOfThisAccount"
                    if not config.api_organization_id
                    else "CallersOfTheOrganization",
                    principals=[iam.AnyPrincipal()],
                    actions=["execute-api:Invoke"],
                    resources=[invoke_any],
                    conditions=caller_condition,
                )
            ]
        )
        method_throttle = apigw.MethodDeploymentOptions(
            throttling_rate_limit=config.submit_rate_limit, throttling_burst_limit=config.submit_burst_limit
        )
        self.rest_api = apigw.RestApi(
            self,
            "RestApi",
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
                access_log_format=apigw.AccessLogFormat.json_with_standard_fields(
                    caller=True,
                    http_method=True,
                    ip=True,
                    protocol=True,
                    request_time=True,
                    resource_path=True,
                    response_length=True,
                    status=True,
                    user=True,
                ),
            ),
            default_method_options=apigw.MethodOptions(authorization_type=apigw.AuthorizationType.IAM),
            endpoint_types=[apigw.EndpointType.REGIONAL],
        )
        validator = self.rest_api.add_request_validator(
            "Validator", validate_request_body=True, validate_request_parameters=True
        )
        # The alias, never $LATEST: only a published version has the SnapStart snapshot.
        integration = apigw.LambdaIntegration(self.fn.target, proxy=True, allow_test_invoke=False)
        from topogov.handlers.api import routes  # the application's routes, not a copy

        for path, methods in routes().items():
            resource = self.rest_api.root.resource_for_path(path)
            for method in methods:
                params = {f"method.request.path.{p}": True for p in ("team", "name") if "{" + p + "}" in path}
                resource.add_method(
                    method,
                    integration,
                    authorization_type=apigw.AuthorizationType.IAM,
                    request_validator=validator,
                    request_parameters=params or None,
                )
        self.url = self.rest_api.url
