"""``topogov whatif --fleet snapshot`` on the local stack: the fleet is the one the reconcile pass
found (the snapshot it wrote to S3, read back through boto3 -> moto over HTTP), its nodes as empty."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

from topogov.handlers.reconcile import handler
from topogov_cli.main import main
from topogov_local import events
from topogov_local.lambda_context import LocalContext

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "whatif"


def whatif(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["whatif", *args])
    return code, out.getvalue(), err.getvalue()


def test_the_snapshots_fleet_is_replayed_with_its_gpu_nodes_and_their_layers(stack, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no .topogov/local here: the stack's own environment points the CLI
    summary = handler(events.scheduled_event(), LocalContext())
    assert summary["snapshot_written"] or summary["with_topology"]
    trace = tmp_path / "trace.csv"
    trace.write_text(
        "submit_s,team,name,pods,gpus_per_pod,duration_s,topology_mode,topology_level\n"
        "0,team-a,l3,4,8,600,required,layer-3\n"
        "0,team-a,b200,2,8,600,auto,\n"
    )
    policy = str(ROOT / "teams.yaml")
    code, out, err = whatif("--trace", str(trace), "--fleet", "snapshot", "--policy", policy, "--output=json")
    assert code == 0, err
    (baseline,) = json.loads(out)["scenarios"].values()
    assert baseline["fleet"]["gpus"] == 18 * 8  # the 16 p5 and 2 p6-b200; the c5 has no topology
    jobs = {j["name"]: j for j in baseline["jobs"]}
    assert jobs["l3"]["start_s"] == 0 and len(jobs["l3"]["nodes"]) == 4
