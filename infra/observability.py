"""Alarms (function errors, API throttles, reconcile failures and passes that stop completing, drift,
Kueue write failures and objects not owned, dead letters, API 5xx and latency) to one SNS topic, and a
dashboard of the reconcile summary, API statuses and per-team in-flight usage.

The topic is encrypted with a customer-managed key: CloudWatch cannot publish to a topic encrypted
with the AWS-managed ``alias/aws/sns`` key, whose policy no one can change
(https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/AlarmThatSendsEmail.html, "Amazon SNS
topics with SSE": the key policy must let ``cloudwatch.amazonaws.com`` use ``kms:Decrypt`` and
``kms:GenerateDataKey*``), and the topic policy lets CloudWatch publish, both only for this account's
alarms (``aws:SourceAccount``, ``aws:SourceArn``: the confused-deputy guard AWS documents for service
principals)."""

from __future__ import annotations

from aws_cdk import ArnFormat, Duration, RemovalPolicy, Stack
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subs
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.config import DeployConfig
from infra.names import METRICS_NAMESPACE, SERVICE

PERIOD = Duration.minutes(5)
CLOUDWATCH = "cloudwatch.amazonaws.com"


def schedule_interval(expression: str) -> Duration:
    """How often ``rate(N unit)`` fires (a cron expression: taken as hourly, a bound for the alarm)."""
    import re

    m = re.match(r"^rate\((\d+) (minute|minutes|hour|hours|day|days)\)$", expression)
    if not m:
        return Duration.hours(1)
    n, unit = int(m.group(1)), m.group(2)
    return {"m": Duration.minutes, "h": Duration.hours, "d": Duration.days}[unit[0]](n)


def topogov_metric(name: str, stat: str = "Sum", **dims: str) -> cw.Metric:
    return cw.Metric(
        namespace=METRICS_NAMESPACE,
        metric_name=name,
        dimensions_map={"service": SERVICE, **dims},
        statistic=stat,
        period=PERIOD,
    )


class Observability(Construct):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        config: DeployConfig,
        functions: dict[str, lambda_.IFunction],
        dead_letters: sqs.IQueue,
        rest_api: apigw.RestApi,
        teams: list[str],
    ) -> None:
        super().__init__(scope, id)
        self.key: kms.Key | None = None
        self.topic: sns.ITopic = self._topic(config)
        self._action = actions.SnsAction(self.topic)
        self.alarms: list[cw.Alarm] = []
        self._alarms(config, functions, dead_letters, rest_api)
        self.dashboard = self._dashboard(config, rest_api, teams)

    def _topic(self, config: DeployConfig) -> sns.ITopic:
        """The alarms' topic: the operator's, or one of the stack's (KMS-encrypted, CloudWatch of
        this account may publish, with the alarm e-mail subscribed)."""
        stack = Stack.of(self)
        alarms_arn = stack.format_arn(
            service="cloudwatch",
            resource="alarm",
            resource_name="*",
            arn_format=ArnFormat.COLON_RESOURCE_NAME,
        )
        from_this_account = {
            "StringEquals": {"aws:SourceAccount": stack.account},
            "ArnLike": {"aws:SourceArn": alarms_arn},
        }
        if config.alarm_topic_arn:  # the operator's topic: its policy must let CloudWatch publish
            return sns.Topic.from_topic_arn(self, "Alarms", config.alarm_topic_arn)
        self.key = kms.Key(
            self,
            "AlarmsKey",
            description="Topogov alarm topic: CloudWatch alarms of this account may publish",
            enable_key_rotation=True,
            removal_policy=RemovalPolicy.DESTROY,
            pending_window=Duration.days(7),
        )
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="CloudWatchAlarmsPublish",
                principals=[iam.ServicePrincipal(CLOUDWATCH)],
                actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                resources=["*"],  # in a key policy, "*" is this key
                conditions=from_this_account,
            )
        )
        topic = sns.Topic(
            self, "Alarms", display_name="Topogov alarms", enforce_ssl=True, master_key=self.key
        )
        topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="CloudWatchAlarmsPublish",
                principals=[iam.ServicePrincipal(CLOUDWATCH)],
                actions=["sns:Publish"],
                resources=[topic.topic_arn],
                conditions=from_this_account,
            )
        )
        if config.alarm_email:
            topic.add_subscription(subs.EmailSubscription(config.alarm_email))
        return topic

    def _alarm(
        self,
        name: str,
        metric: cw.IMetric,
        threshold: float,
        description: str,
        periods: int = 1,
        below: bool = False,
    ) -> None:
        a = cw.Alarm(
            self,
            name,
            metric=metric,
            threshold=threshold,
            evaluation_periods=periods,
            comparison_operator=cw.ComparisonOperator.LESS_THAN_THRESHOLD
            if below
            else cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cw.TreatMissingData.BREACHING if below else cw.TreatMissingData.NOT_BREACHING,
            alarm_description=description,
        )
        a.add_alarm_action(self._action)
        self.alarms.append(a)

    def _alarms(
        self,
        config: DeployConfig,
        functions: dict[str, lambda_.IFunction],
        dead_letters: sqs.IQueue,
        rest_api: apigw.RestApi,
    ) -> None:
        for name, fn in functions.items():
            self._alarm(f"{name}Errors", fn.metric_errors(period=PERIOD), 1, f"the {name} function failed")
        # The reconcile function runs one pass at a time (a lease): a burst of "running" events defers
        # its instances to the pass holding it (PassSkipped), as designed. What matters is an event
        # dropped (DeadLetters below) and passes that stop completing; its throttles (the account's
        # concurrency exhausted) show as Errors-free retries by Lambda and are no alarm there.
        self._alarm(
            "ApiThrottles",
            functions["Api"].metric_throttles(period=PERIOD),
            1,
            "the api function was throttled (the account's concurrency is exhausted)",
        )
        self._reconcile_alarms(config, dead_letters)
        self._alarm("Api5xx", rest_api.metric_server_error(period=PERIOD), 1, "the API answered 5xx")
        self._alarm(
            "ApiLatency",
            rest_api.metric_latency(period=PERIOD, statistic="p99"),
            config.api_latency_alarm_ms,
            "the API's p99 latency is above its threshold",
            periods=3,
        )

    def _reconcile_alarms(self, config: DeployConfig, dead_letters: sqs.IQueue) -> None:
        """Passes that stop completing, fail, stop early, correct too much; the governor's writes;
        reconcile events dropped."""
        interval = schedule_interval(config.reconcile_schedule)
        window = Duration.minutes(max(15, 3 * int(interval.to_minutes())))
        self._alarm(
            "ReconcileNotCompleting",
            cw.Metric(
                namespace=METRICS_NAMESPACE,
                metric_name="Completed",
                dimensions_map={"service": SERVICE, "mode": "full"},
                statistic="Sum",
                period=window,
            ),
            1,
            f"no full reconcile pass completed in {int(window.to_minutes())} minutes "
            "(the schedule, the function or the cluster is failing)",
            below=True,
        )
        self._alarm(
            "ReconcileFailures",
            topogov_metric("Failed", mode="full"),
            1,
            "a reconcile pass could not patch some nodes",
            periods=3,
        )
        self._alarm(
            "ReconcileIncomplete",
            topogov_metric("Incomplete", mode="full"),
            1,
            "reconcile passes keep stopping before the end (budget or EC2 errors)",
            periods=6,
        )
        self._alarm(
            "Drift",
            topogov_metric("Patched", "Maximum", mode="full"),
            config.drift_alarm_threshold,
            "a full pass corrected more node labels than expected: something rewrites them",
        )
        self._alarm(
            "KueueWriteFailures",
            topogov_metric("KueueFailed", mode="full"),
            1,
            "the governor could not write some Kueue objects (RBAC, Kueue missing or refusing them)",
            periods=3,
        )
        self._alarm(
            "KueueNotOwned",
            topogov_metric("KueueUnowned", "Maximum", mode="full"),
            1,
            "a Kueue object Topogov should manage exists without its label: it is left alone",
            periods=6,
        )
        self._alarm(
            "DeadLetters",
            dead_letters.metric_approximate_number_of_messages_visible(period=PERIOD),
            1,
            "reconcile events failed after their retries",
        )

    def _dashboard(self, config: DeployConfig, rest_api: apigw.RestApi, teams: list[str]) -> cw.Dashboard:
        dashboard = cw.Dashboard(self, "Dashboard", dashboard_name=f"{SERVICE}-{config.cluster_name}")
        dashboard.add_widgets(
            cw.GraphWidget(
                title="Reconcile: nodes patched / unchanged / failed",
                left=[topogov_metric(m, mode="full") for m in ("Patched", "Unchanged", "Failed")],
            ),
            cw.GraphWidget(
                title="Reconcile: EC2 calls, Kubernetes reads and writes",
                left=[topogov_metric(m, mode="full") for m in ("Ec2Calls", "K8sReads", "K8sWrites")],
                right=[topogov_metric("DurationSeconds", "Maximum", mode="full")],
            ),
        )
        dashboard.add_widgets(
            cw.GraphWidget(
                title="API requests by status",
                left=[
                    rest_api.metric_count(period=PERIOD),
                    rest_api.metric_client_error(period=PERIOD),
                    rest_api.metric_server_error(period=PERIOD),
                ],
                right=[rest_api.metric_latency(period=PERIOD, statistic="p99")],
            ),
            cw.GraphWidget(
                title="Governor: Kueue objects created / updated / deleted / held; fallbacks",
                left=[
                    topogov_metric(m, mode="full")
                    for m in (
                        "KueueCreated",
                        "KueueRecreated",
                        "KueueUpdated",
                        "KueueDeleted",
                        "KueueHeld",
                        "TopologyFallbacks",
                    )
                ],
            ),
            cw.GraphWidget(
                title="In flight per team (GPUs)",
                left=[topogov_metric("InFlightGpu", "Maximum", team=t) for t in teams],
            ),
        )
        dashboard.add_widgets(
            cw.GraphWidget(
                title="Placement: running multi-pod jobs inside one domain (%), per layer",
                left=[
                    topogov_metric("PlacementInOneDomain", "Average", level=f"layer-{i}")
                    for i in (1, 2, 3, 4)
                ],
                right=[topogov_metric("PlacementJobs", "Maximum", mode="full")],
            ),
            cw.GraphWidget(
                title="Placement per team: jobs inside one layer-3 domain (%)",
                left=[
                    topogov_metric("PlacementInOneDomain", "Average", level="layer-3", team=t) for t in teams
                ],
            ),
        )
        return dashboard
