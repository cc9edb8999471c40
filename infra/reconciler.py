"""The reconcile function: the EventBridge schedule (full pass) and EC2 state-change events (targeted
pass), one pass at a time by a lease in the counters table (``topogov/adapters/lease.py``; no
reserved concurrency, which a small account cannot grant), a dead-letter queue for failed async
events."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.config import DeployConfig
from infra.functions import FunctionContext, FunctionSpec, TopogovFunction
from infra.names import POLICY_PATH, SNAPSHOT_KEY
from topogov.adapters.tables import LIVE_INDEX
from topogov.settings import ReconcileSettings

# A 10,000-node first pass needs 100 DescribeInstanceTopology calls at 1 per second and 10,000 label
# patches (measured: 22 s of wall time for the patches locally); a pass that runs out of its budget
# stops cleanly and the next one continues, so the Lambda maximum leaves ample room.
TIMEOUT = Duration.minutes(15)


class Reconciler(Construct):
    def __init__(self, scope: Construct, id: str, *, context: FunctionContext) -> None:
        super().__init__(scope, id)
        config, storage = context.config, context.storage
        self.dlq = sqs.Queue(
            self,
            "DeadLetters",
            retention_period=Duration.days(14),
            enforce_ssl=True,
            encryption=sqs.QueueEncryption.SQS_MANAGED,
        )
        settings = ReconcileSettings(
            cluster_name=config.cluster_name,
            snapshot_bucket=storage.snapshot_bucket.bucket_name,
            snapshot_key=SNAPSHOT_KEY,
            policy_file=POLICY_PATH,
            ledger_table=storage.ledger.table_name,
            counters_table=storage.counters.table_name,
            budget_margin_s=30,
            kueue_api_version=config.kueue_api_version,
            governor=config.governor,
            verify_after_s=config.label_verify_after,
            # HyperPod mode (domain/hyperpod/mode.py): -c topogov:hyperpodClusterArn
            hyperpod_cluster_arn=config.hyperpod_cluster_arn,
        )
        self.settings = settings
        self.fn = TopogovFunction(
            self,
            "Reconcile",
            spec=FunctionSpec(
                "reconcile", "topogov.handlers.reconcile.handler", TIMEOUT, 1024, settings.to_env()
            ),
            context=context,
            dead_letter_queue=self.dlq,
            retry_attempts=2,
            max_event_age=Duration.hours(1),
        )
        self._grant(context)
        self._rules(config)

    def _grant(self, context: FunctionContext) -> None:
        """What the function calls, each statement named (observed by tests/rehearse under this role)."""
        config, storage = context.config, context.storage
        self.fn.role.add_to_policy(
            iam.PolicyStatement(
                sid="DescribeInstanceTopology",
                actions=["ec2:DescribeInstanceTopology"],
                resources=["*"],  # the action supports no resource-level permissions
            )
        )
        self.fn.allow_describe_cluster(config.cluster_name)
        self.fn.role.add_to_policy(
            iam.PolicyStatement(
                sid="TopologySnapshot",
                actions=["s3:GetObject", "s3:PutObject"],
                resources=[storage.snapshot_bucket.arn_for_objects(SNAPSHOT_KEY)],
            )
        )
        self.fn.role.add_to_policy(storage.snapshot_existence_statement())
        # The ledger sync lists and reads the job records and releases a charge (an UpdateItem of the
        # record beside one of the team's counters, in one transaction); counters are read, never
        # listed (observed by tests/rehearse under this role). The pass's lease is an item of the
        # counters table, written by conditional UpdateItems only.
        self.fn.role.add_to_policy(
            iam.PolicyStatement(
                sid="LedgerSync",
                actions=["dynamodb:GetItem", "dynamodb:UpdateItem"],
                resources=[storage.ledger.table_arn],
            )
        )
        # A pass reads the live records only, through the ledger's sparse index (adapters/tables.py).
        self.fn.role.add_to_policy(
            iam.PolicyStatement(
                sid="LiveRecords",
                actions=["dynamodb:Query"],
                resources=[f"{storage.ledger.table_arn}/index/{LIVE_INDEX.name}"],
            )
        )
        self.fn.role.add_to_policy(
            iam.PolicyStatement(
                sid="CountersSync",
                actions=["dynamodb:GetItem", "dynamodb:UpdateItem"],
                resources=[storage.counters.table_arn],
            )
        )

    def _rules(self, config: DeployConfig) -> None:
        """The schedule (full passes) and EC2's "running" events (targeted passes), with retries and
        the dead-letter queue."""
        function = self.fn.function
        self.schedule = events.Rule(
            self,
            "Schedule",
            description="Topogov full reconcile pass",
            schedule=events.Schedule.expression(config.reconcile_schedule),
            targets=[targets.LambdaFunction(function, dead_letter_queue=self.dlq, retry_attempts=2)],
        )
        self.instance_running = events.Rule(
            self,
            "InstanceRunning",
            description="Topogov targeted pass when an EC2 instance enters the running state",
            event_pattern=events.EventPattern(
                source=["aws.ec2"],
                detail_type=["EC2 Instance State-change Notification"],
                detail={"state": ["running"]},
            ),
            targets=[targets.LambdaFunction(function, dead_letter_queue=self.dlq, retry_attempts=2)],
        )
