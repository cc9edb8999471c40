"""The topology snapshot in S3 (moto over HTTP)."""

from __future__ import annotations

import uuid

import pytest

from topogov.adapters.snapshot_store import S3SnapshotStore
from topogov.domain.errors import SnapshotError
from topogov.domain.labels import InstanceTopology
from topogov.domain.quantity import Resources
from topogov.domain.snapshot import Snapshot
from topogov.domain.tree import NodeCapacity

from .conftest import aws_client


@pytest.fixture
def store(aws_url):
    s3 = aws_client(aws_url, "s3")
    bucket = f"snap-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    return S3SnapshotStore(s3, bucket)


def test_missing_snapshot_is_none(store):
    assert store.load() is None


def test_round_trip_keeps_the_cache_and_capacity(store):
    snap = Snapshot(
        instances={
            "i-1": InstanceTopology("i-1", ("a", "b", "c"), "p5.48xlarge", "us-east-1a", "use1-az1", "", 5.0)
        },
        absent={"i-2": 6.0},
        nodes={
            "n1": NodeCapacity(
                "n1", ("a", "b", "c"), "p5.48xlarge", "i-1", Resources(gpu=8), Resources(gpu=2)
            )
        },
        generated_at=7.0,
    )
    store.save(snap)
    back = store.load()
    assert back.instances == snap.instances and back.instances["i-1"].fetched_at == 5.0
    assert back.absent == {"i-2": 6.0} and back.nodes == snap.nodes
    assert store.load().to_json()["tree"]["domains"][0]["allocatable"]["gpu"] == 8


def test_a_corrupt_snapshot_is_a_clear_error(store):
    store._s3.put_object(Bucket=store.bucket, Key=store.key, Body=b"{not json")
    with pytest.raises(SnapshotError, match="corrupt snapshot"):
        store.load()


def test_access_denied_is_not_taken_for_a_missing_snapshot(aws_url):
    """S3 answers a GET of a missing key with 403 AccessDenied to a caller without s3:ListBucket (S3 API
    Reference, GetObject, "Permissions"). The store must not read that as "no snapshot yet": it says
    what the role lacks. Here the client is refused by botocore's own Stubber, handed in as the
    adapter's client (no patching)."""
    from botocore.stub import Stubber

    s3 = aws_client(aws_url, "s3")
    stub = Stubber(s3)
    stub.add_client_error("get_object", service_error_code="AccessDenied", http_status_code=403)
    store = S3SnapshotStore(s3, "snapshots")
    with (
        stub,
        pytest.raises(SnapshotError, match=r"AccessDenied \(the role needs s3:GetObject .* s3:ListBucket"),
    ):
        store.load()
