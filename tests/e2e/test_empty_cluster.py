"""An empty cluster is a clean pass: nothing to ask, nothing to write, a snapshot all the same."""

from __future__ import annotations

import json

from topogov.bootstrap import build_labeler
from topogov.logic.labeler import PassOptions
from topogov.settings import ReconcileSettings
from topogov_local.processes import environ
from topogov_local.stack import LocalStack, StackOptions


def test_empty_cluster(tmp_path):
    stack = LocalStack(StackOptions(directory=tmp_path, fleet="", extra_nodes=False, api_port=None))
    with stack, environ(stack.env()):
        s = build_labeler(ReconcileSettings.from_env()).run(PassOptions())
        bucket = stack.output("SnapshotBucket")
        obj = stack.client("s3").get_object(Bucket=bucket, Key="topology/snapshot.json")
    assert (s.nodes_seen, s.ec2_calls, s.k8s_writes, s.complete) == (0, 0, 0, True)
    doc = json.loads(obj["Body"].read())
    assert doc["nodes"] == [] and doc["tree"]["domains"] == []
