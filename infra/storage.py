"""Storage: the job ledger, the in-flight counters, the idempotency records, the topology snapshot."""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from topogov.adapters.tables import COUNTERS, IDEMPOTENCY, LEDGER, TableKeys


class Storage(Construct):
    def __init__(self, scope: Construct, id: str) -> None:
        super().__init__(scope, id)

        def table(name: str, keys: TableKeys) -> dynamodb.Table:
            string = dynamodb.AttributeType.STRING
            made = dynamodb.Table(
                self,
                name,
                partition_key=dynamodb.Attribute(name=keys.partition, type=string),
                sort_key=dynamodb.Attribute(name=keys.sort, type=string) if keys.sort else None,
                billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
                encryption=dynamodb.TableEncryption.AWS_MANAGED,
                point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                    point_in_time_recovery_enabled=True
                ),
                time_to_live_attribute=keys.ttl,
                removal_policy=RemovalPolicy.RETAIN,
            )
            if keys.index is not None:
                made.add_global_secondary_index(
                    index_name=keys.index.name,
                    partition_key=dynamodb.Attribute(name=keys.index.partition, type=string),
                    sort_key=dynamodb.Attribute(name=keys.index.sort, type=string),
                    projection_type=dynamodb.ProjectionType.ALL,
                )
            return made

        self.ledger = table("Ledger", LEDGER)
        self.counters = table("Counters", COUNTERS)
        self.idempotency = table("Idempotency", IDEMPOTENCY)
        self.snapshot_bucket = s3.Bucket(
            self,
            "Snapshot",
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            versioned=True,
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="expire-old-snapshots",
                    noncurrent_version_expiration=Duration.days(7),
                    abort_incomplete_multipart_upload_after=Duration.days(1),
                )
            ],
            removal_policy=RemovalPolicy.RETAIN,
        )

    def snapshot_existence_statement(self) -> iam.PolicyStatement:
        """``s3:ListBucket`` on the snapshot bucket: without it S3 answers a GET of a key that does
        not exist yet (before the first reconcile pass) with 403 AccessDenied instead of 404
        NoSuchKey (https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetObject.html, "Permissions").
        No ``s3:prefix`` condition: a GET carries none, so a conditioned grant would not count. The
        bucket holds the snapshot and its versions only, so listing shows nothing more."""
        return iam.PolicyStatement(
            sid="TellAMissingSnapshot",
            actions=["s3:ListBucket"],
            resources=[self.snapshot_bucket.bucket_arn],
        )
