"""A flood of padded submit-and-cancel cycles (issue 38): each record kept what the request said, whole,
forever, and every reconcile pass loaded every record ever written, so a few thousand cycles of
near-limit bodies (minutes at the stage's rate) exhausted the reconcile function's memory. Now a record
keeps a bounded digest of its request and a pass reads the live records only: after the flood, a pass
reads what it read on the quiet stack, and takes the same memory.

``make hardening`` floods 3,000 cycles; ``make test`` 40. The report has the pass's peak memory
(tracemalloc, the pass's own allocations) and processor time, quiet and after the flood."""

from __future__ import annotations

import copy
import json
import time
import tracemalloc

from topogov.handlers.reconcile import handler
from topogov_local import events
from topogov_local.aws_example import AWS_EXAMPLE
from topogov_local.lambda_context import LocalContext

from .conftest import call, scale

PAD = 900_000  # bytes of a container's argument: a body just under the API's 1 MiB bound


def padded(name: str) -> dict:
    """AWS's example with a 900 KB argument (annotations may hold 256 KiB at most: Kubernetes)."""
    m = copy.deepcopy(AWS_EXAMPLE)
    m["metadata"]["name"] = name
    m["spec"]["template"]["spec"]["containers"][0]["args"] = ["sleep", "1", "x" * PAD]
    m["spec"]["template"]["metadata"]["labels"]["job-name"] = name
    del m["spec"]["template"]["metadata"]["annotations"]  # no topology: nothing to place
    return m


def measured_pass() -> dict:
    """One reconcile pass in this process: its peak traced memory and processor time (best of 3:
    the machine's other load only adds)."""
    runs = []
    for _ in range(3):
        tracemalloc.start()
        cpu0 = time.process_time()
        handler(events.scheduled_event(), LocalContext())
        cpu = time.process_time() - cpu0
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        runs.append((peak, cpu))
    return {"peak_bytes": min(r[0] for r in runs), "cpu_s": min(r[1] for r in runs)}


def test_a_flood_of_padded_cycles_leaves_the_pass_as_it_was(stack, report):
    quiet = measured_pass()
    cycles = scale(40, 3000)
    stored = []
    for i in range(cycles):
        name = f"flood-{i:05d}"
        resp = call(stack, "POST", "/v1/jobs", body={"manifest": padded(name)})
        assert resp.status_code == 201, resp.text[:300]
        assert call(stack, "DELETE", f"/v1/jobs/team-a/{name}").status_code == 200
        if i % max(1, cycles // 10) == 0:
            item = stack.client("dynamodb").get_item(
                TableName=stack.output("LedgerTable"), Key={"team": {"S": "team-a"}, "name": {"S": name}}
            )["Item"]
            stored.append(len(json.dumps(item)))
    flooded = measured_pass()
    # Each record kept a digest of its request, not its 900 KB argument
    assert max(stored) < 8_000, stored
    # And the pass takes what it took on the quiet stack: it never reads a released record
    ratio_mem = flooded["peak_bytes"] / quiet["peak_bytes"]
    ratio_cpu = flooded["cpu_s"] / quiet["cpu_s"]
    report.add(
        "flood",
        cycles=cycles,
        record_bytes_max=max(stored),
        quiet_pass_peak_mb=round(quiet["peak_bytes"] / 2**20, 2),
        flooded_pass_peak_mb=round(flooded["peak_bytes"] / 2**20, 2),
        quiet_pass_cpu_s=round(quiet["cpu_s"], 3),
        flooded_pass_cpu_s=round(flooded["cpu_s"], 3),
        peak_ratio=round(ratio_mem, 3),
        cpu_ratio=round(ratio_cpu, 3),
    )
    assert ratio_mem < 1.10, (quiet, flooded)
