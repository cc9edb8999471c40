"""``topogov whatif`` as a user runs it (a subprocess of the installed CLI, offline from files)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "whatif"


def whatif(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "topogov_cli.main", "whatif", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


BASE = ("--trace", str(EXAMPLES / "trace.csv"), "--fleet", str(EXAMPLES / "fleet.csv"))


def test_a_policy_change_side_by_side_in_100_columns(tmp_path):
    # Files under a deep directory, as on a CI machine whose checkout lives somewhere long: the
    # output's width must not depend on where the files are.
    deep = tmp_path.joinpath(*["a-directory-with-a-long-name"] * 4)
    deep.mkdir(parents=True)
    for name in ("trace.csv", "fleet.csv", "teams-proposed.yaml"):
        (deep / name).write_bytes((EXAMPLES / name).read_bytes())
    (deep / "teams.yaml").write_bytes((ROOT / "teams.yaml").read_bytes())
    assert len(str(deep / "trace.csv")) > 100
    out = whatif(
        "--trace", str(deep / "trace.csv"), "--fleet", str(deep / "fleet.csv"),
        "--baseline-policy", str(deep / "teams.yaml"), "--policy", str(deep / "teams-proposed.yaml"),
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert max(len(line) for line in lines) <= 100
    assert lines[1].split()[:2] == ["baseline:", "68"] and lines[2].split()[:2] == ["proposed:", "68"]
    # offline, the model's profile is said; the cluster's Kueue release is not read
    assert lines[3] == "  Kueue model profile v0.17.0 (offline: the cluster's Kueue release is not read)"
    assert lines[5].split() == ["baseline", "proposed"]  # the columns
    for label in ("wait p95", "GPU-hours used / quota", "borrowed GPU-hours", "preemptions suffered"):
        assert label in out.stdout
    assert "inside one layer-3 node" in out.stdout and "free whole layer-3 nodes, mean" in out.stdout


def test_json_has_every_jobs_start_and_nodes_per_scenario_and_a_fleet_change_adds_capacity():
    out = whatif(*BASE, "--policy", "teams.yaml", "--fleet-change", "+p5.48xlarge=32", "--output", "json")
    assert out.returncode == 0, out.stderr
    scenarios = json.loads(out.stdout)["scenarios"]
    assert set(scenarios) == {"baseline", "proposed"}
    for s in scenarios.values():
        assert {"teams", "fleet", "jobs"} <= set(s)
        job = next(j for j in s["jobs"] if j["start_s"] is not None)
        assert {"name", "team", "submit_s", "start_s", "end_s", "nodes"} <= set(job) and job["nodes"]
    assert scenarios["proposed"]["fleet"]["gpus"] == scenarios["baseline"]["fleet"]["gpus"] + 256
    assert scenarios["proposed"]["fleet"]["wait_p95_s"] <= scenarios["baseline"]["fleet"]["wait_p95_s"]
    added = {n for j in scenarios["proposed"]["jobs"] for n in j["nodes"] if n.startswith("new0-")}
    assert added, "no job ran on the added nodes"


def test_a_wrong_input_exits_2_naming_the_file_line_and_field(tmp_path):
    bad = tmp_path / "trace.csv"
    bad.write_text(
        "submit_s,team,name,pods,gpus_per_pod,duration_s\n0,team-a,ok,1,8,60\n5,team-a,bad,two,8,60\n"
    )
    out = whatif("--trace", str(bad), "--fleet", str(EXAMPLES / "fleet.csv"), "--policy", "teams.yaml")
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.strip() == f"topogov whatif: {bad}, line 3, pods: must be a whole number, got 'two'"
    missing = whatif(*BASE, "--policy", str(tmp_path / "nope.yaml"))
    assert missing.returncode == 2 and "cannot read policy" in missing.stderr
    change = whatif(*BASE, "--policy", "teams.yaml", "--fleet-change", "p5.48xlarge=1")
    assert change.returncode == 2 and "expected +TYPE=N or -TYPE=N" in change.stderr


def test_a_release_lag_holds_the_quota_longer_and_a_negative_one_is_refused():
    plain = json.loads(whatif(*BASE, "--policy", "teams.yaml", "--output", "json").stdout)
    lagged = json.loads(whatif(*BASE, "--policy", "teams.yaml", "--release-lag=60", "--output=json").stdout)
    first = {j["name"]: j for j in plain["scenarios"]["baseline"]["jobs"]}
    later = {j["name"]: j for j in lagged["scenarios"]["baseline"]["jobs"]}
    same = [n for n, j in first.items() if j["start_s"] is not None and later[n]["start_s"] == j["start_s"]]
    ran = same[0]
    assert later[ran]["end_s"] == first[ran]["end_s"] + 60
    bad = whatif(*BASE, "--policy", "teams.yaml", "--release-lag", "-1")
    assert bad.returncode == 2 and "--release-lag: must be at least 0" in bad.stderr
