"""Alarms (function errors and throttles, reconcile failures, drift, Kueue write failures and
objects not owned, dead letters, API 5xx and
latency) to one SNS topic, and a dashboard of the reconcile summary, API statuses and per-team
in-flight usage."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subs
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.config import DeployConfig
from infra.names import METRICS_NAMESPACE, SERVICE

PERIOD = Duration.minutes(5)


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
        if config.alarm_topic_arn:
            self.topic: sns.ITopic = sns.Topic.from_topic_arn(self, "Alarms", config.alarm_topic_arn)
        else:
            topic = sns.Topic(
                self,
                "Alarms",
                display_name="Topogov alarms",
                enforce_ssl=True,
                master_key=kms.Alias.from_alias_name(self, "SnsKey", "alias/aws/sns"),
            )
            if config.alarm_email:
                topic.add_subscription(subs.EmailSubscription(config.alarm_email))
            self.topic = topic
        action = actions.SnsAction(self.topic)
        self.alarms: list[cw.Alarm] = []

        def alarm(
            name: str, metric: cw.IMetric, threshold: float, description: str, periods: int = 1
        ) -> None:
            a = cw.Alarm(
                self,
                name,
                metric=metric,
                threshold=threshold,
                evaluation_periods=periods,
                comparison_operator=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
                alarm_description=description,
            )
            a.add_alarm_action(action)
            self.alarms.append(a)

        for name, fn in functions.items():
            alarm(f"{name}Errors", fn.metric_errors(period=PERIOD), 1, f"the {name} function failed")
            alarm(
                f"{name}Throttles",
                fn.metric_throttles(period=PERIOD),
                1,
                f"the {name} function was throttled",
            )
        alarm(
            "ReconcileFailures",
            topogov_metric("Failed", mode="full"),
            1,
            "a reconcile pass could not patch some nodes",
            periods=3,
        )
        alarm(
            "ReconcileIncomplete",
            topogov_metric("Incomplete", mode="full"),
            1,
            "reconcile passes keep stopping before the end (budget or EC2 errors)",
            periods=6,
        )
        alarm(
            "Drift",
            topogov_metric("Patched", "Maximum", mode="full"),
            config.drift_alarm_threshold,
            "a full pass corrected more node labels than expected: something rewrites them",
        )
        alarm(
            "KueueWriteFailures",
            topogov_metric("KueueFailed", mode="full"),
            1,
            "the governor could not write some Kueue objects (RBAC, Kueue missing or refusing them)",
            periods=3,
        )
        alarm(
            "KueueNotOwned",
            topogov_metric("KueueUnowned", "Maximum", mode="full"),
            1,
            "a Kueue object Topogov should manage exists without its label: it is left alone",
            periods=6,
        )
        alarm(
            "DeadLetters",
            dead_letters.metric_approximate_number_of_messages_visible(period=PERIOD),
            1,
            "reconcile events failed after their retries",
        )
        alarm("Api5xx", rest_api.metric_server_error(period=PERIOD), 1, "the API answered 5xx")
        alarm(
            "ApiLatency",
            rest_api.metric_latency(period=PERIOD, statistic="p99"),
            config.api_latency_alarm_ms,
            "the API's p99 latency is above its threshold",
            periods=3,
        )

        self.dashboard = cw.Dashboard(self, "Dashboard", dashboard_name=f"{SERVICE}-{config.cluster_name}")
        self.dashboard.add_widgets(
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
        self.dashboard.add_widgets(
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
