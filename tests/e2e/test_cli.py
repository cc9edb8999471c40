"""The `topogov` command line: every command's --help, and the labeler commands on the local stack."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from topogov.cli.main import main

COMMANDS = [[], ["local"], ["topology"], ["reconcile"], ["bench"], ["bench", "reconcile"]]


@pytest.mark.parametrize("cmd", COMMANDS, ids=lambda c: " ".join(c) or "topogov")
def test_every_command_has_help(cmd, capsys):
    with pytest.raises(SystemExit) as exc:
        main([*cmd, "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: topogov")


def test_unknown_command_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["nope"])
    assert exc.value.code == 2


def test_topology_mermaid_and_json_from_one_list(stack, capsys):
    assert main(["topology", "--kubeconfig", str(stack.kubeconfig)]) == 0
    mermaid = capsys.readouterr().out
    assert mermaid.startswith("flowchart TD\n")
    assert 'root["Cluster"]' in mermaid and "unplaced" in mermaid
    assert main(["topology", "--format", "json", "--kubeconfig", str(stack.kubeconfig)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {"depth", "levels", "domains", "unplaced"} <= set(doc)


def test_topology_against_an_unreachable_cluster_exits_3(tmp_path, capsys):
    cfg = tmp_path / "kubeconfig"
    from topogov.local.kube_api import write_kubeconfig

    write_kubeconfig(cfg, "http://127.0.0.1:9", "x")
    assert main(["topology", "--kubeconfig", str(cfg)]) == 3
    assert "cannot read nodes" in capsys.readouterr().err


def test_reconcile_command_runs_one_pass(stack, capsys):
    code = main(
        [
            "reconcile",
            "--kubeconfig",
            str(stack.kubeconfig),
            "--bucket",
            "topogov-local-snapshot",
            "--ec2-rate",
            "1000",
        ]
    )
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["mode"] == "full" and summary["failed"] == 0


def test_local_once_runs_the_walkthrough_and_cleans_up(tmp_path):
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    for k in [k for k in env if k.startswith(("TOPOGOV_", "AWS_"))]:
        env.pop(k)
    out = subprocess.run(
        [sys.executable, "-m", "topogov.cli.main", "local", "--once", "--api-port", "0"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    text = out.stdout
    assert "full pass · nodes 75" in text and "EC2 calls 1" in text
    assert "malformed_provider_id 1" in text
    assert "patched 0 · unchanged 68" in text  # the steady pass
    assert "targeted pass · nodes 1" in text
    assert "flowchart TD" in text and "Layer 4:" in text
    local = Path(tmp_path, ".topogov", "local")
    assert (local / "kubeconfig").exists() and (local / "aws-credentials").exists()
    assert not (local / "endpoints.json").exists()  # removed on exit
