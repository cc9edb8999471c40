"""The api function's refusal metrics: each refusal counted by its code in CloudWatch's embedded
metric format, beside the status class counted with the request's other metrics."""

from __future__ import annotations

import json

from topogov.handlers.api import metrics_code
from topogov.observability import metrics


def test_a_refusal_is_counted_by_its_code_and_by_its_status_class(capsys):
    metrics.clear_metrics()
    metrics_code("TOPOLOGY_INFEASIBLE", 422)
    (line,) = [json.loads(x) for x in capsys.readouterr().out.splitlines() if x.startswith("{")]
    (directive,) = line["_aws"]["CloudWatchMetrics"]
    assert directive["Namespace"] == "Topogov"
    assert [m["Name"] for m in directive["Metrics"]] == ["Refused"]
    assert ["Code"] in [d[-1:] for d in directive["Dimensions"]]
    assert line["Code"] == "TOPOLOGY_INFEASIBLE" and line["Refused"] == [1.0]
    assert metrics.metric_set["Status4xx"]["Value"] == [1.0]  # flushed with the request's metrics
    metrics.clear_metrics()


def test_a_success_is_no_refusal_and_disabled_metrics_print_nothing(capsys, monkeypatch):
    metrics.clear_metrics()
    metrics_code("OK", 201)
    assert capsys.readouterr().out == "" and metrics.metric_set["Status2xx"]["Value"] == [1.0]
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")  # as the local stack runs the functions
    metrics_code("NOT_FOUND", 404)
    assert capsys.readouterr().out == ""
    metrics.clear_metrics()
