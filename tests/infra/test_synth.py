"""A full synth through the pinned CDK CLI, with real (Docker-free) bundling."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_npx_cdk_synth_bundles_the_layer_and_the_code_without_docker(tmp_path):
    assert (ROOT / "node_modules" / ".bin" / "cdk").exists(), "run `make install` (npm ci) first"
    env = {
        **os.environ,
        "JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION": "1",
        "CDK_DISABLE_CLI_TELEMETRY": "true",  # as every CDK run of the local stack (rehearse/cdk.py)
        "PATH": f"{ROOT / '.venv' / 'bin'}:{os.environ['PATH']}",
    }
    out = tmp_path / "cdk.out"
    proc = subprocess.run(
        [str(ROOT / "node_modules" / ".bin" / "cdk"), "synth", "--quiet", "--output", str(out),
         "-c", "topogov:clusterName=gpu-training"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assets = json.loads((out / "Topogov.assets.json").read_text())["files"]
    dirs = [out / a["source"]["path"] for a in assets.values() if a["source"].get("packaging") == "zip"]
    layer = next(d for d in dirs if (d / "python").exists())
    code = next(d for d in dirs if (d / "topogov").exists())
    # the layer: manylinux x86_64 wheels for CPython 3.12, whatever this machine runs
    assert list((layer / "python" / "pydantic_core").glob("*.cpython-312-x86_64-linux-gnu.so"))
    assert (layer / "python" / "kubernetes").is_dir() and (
        layer / "python" / "aws_lambda_powertools"
    ).is_dir()
    # only what the functions import (infra/layer.py; tests/infra/test_layer.py proves it): under 60 MB
    # unzipped, without kubernetes' asyncio client and the aiohttp stack it alone needs
    from infra.layer import UNUSED_DISTRIBUTIONS, size

    assert size(layer) <= 60_000_000, size(layer)
    assert not (layer / "python" / "kubernetes" / "aio").exists()
    assert (layer / "python" / "kubernetes" / "client" / "api_client.py").exists()
    for dist in UNUSED_DISTRIBUTIONS:
        assert not list((layer / "python").glob(f"{dist.replace('-', '_')}*")), dist
    assert not list((layer / "python").glob("snapshot_restore_py*"))  # the runtime's copy runs the hooks
    # boto3 and botocore ship together, at the versions pinned as a pair (never the runtime's boto3 over
    # the layer's botocore)
    pins = dict(
        line.split("==")
        for line in (ROOT / "requirements" / "runtime.txt").read_text().split()
        if "==" in line
    )
    for dist in ("boto3", "botocore"):
        (info,) = (layer / "python").glob(f"{dist}-*.dist-info")
        assert info.name == f"{dist}-{pins[dist]}.dist-info", info.name
    # the code: exactly the topogov package (the allow-list) and the validated policy, nothing else
    shipped = sorted(str(p.relative_to(code)) for p in code.rglob("*") if p.is_file())
    package = ROOT / "lambdas"
    expected = sorted(
        str(p.relative_to(package))
        for p in (package / "topogov").rglob("*.py")
        if "__pycache__" not in p.parts
    )
    assert shipped == sorted([*expected, "policy/teams.yaml"]), set(shipped) ^ {
        *expected,
        "policy/teams.yaml",
    }
    assert not any(s.startswith(("topogov_cli", "topogov_local")) for s in shipped)
    report = (out / "AwsSolutions--Topogov-NagReport.csv").read_text()
    assert "Non-Compliant" not in report
