"""An empty cluster is a clean pass: nothing to ask, nothing to write, a snapshot all the same."""

from __future__ import annotations

import json
import os

from topogov.bootstrap import build_labeler
from topogov.config import ReconcileSettings
from topogov.local.stack import LocalStack, StackOptions
from topogov.logic.labeler import PassOptions


def test_empty_cluster(tmp_path):
    with LocalStack(StackOptions(directory=tmp_path, fleet="", extra_nodes=False, api_port=None)) as stack:
        env = stack.env()
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            s = build_labeler(ReconcileSettings.from_env()).run(PassOptions())
            obj = stack.client("s3").get_object(Bucket="topogov-local-snapshot", Key="topology/snapshot.json")
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    assert (s.nodes_seen, s.ec2_calls, s.k8s_writes, s.complete) == (0, 0, 0, True)
    doc = json.loads(obj["Body"].read())
    assert doc["nodes"] == [] and doc["tree"]["domains"] == []
