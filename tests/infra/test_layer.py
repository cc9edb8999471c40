"""The dependencies layer ships only what the functions import (infra/layer.py), proven by what they open.

The full layer (``pip install`` of runtime.txt, as before pruning) and the pruned one are each put on
the path of a fresh interpreter of the Lambda runtime's Python (3.12 when this machine has it) with
the code, and nothing else (``-I -S``). The interpreter imports both handlers and every module the
service names in any import statement, answers a dry run through the api handler against a moto
server, makes a Kubernetes request through the EKS client and EC2 and EKS calls, and records every file
it opens under the layer (an audit hook). Nothing pruned may be among them, and the pruned layer must
answer the same and open the same files. Building the layers needs PyPI (or TOPOGOV_WHEELHOUSE)."""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from infra import layer
from topogov_local.bench import coldstart as bench

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 60_000_000  # bytes, unzipped


def pins() -> dict[str, str]:
    text = (ROOT / "requirements" / "runtime.txt").read_text()
    return dict(line.split("==") for line in text.split() if "==" in line)


@pytest.fixture(scope="module")
def layers(tmp_path_factory):
    """(interpreter, full site, pruned site, what pruning removed, runtime stand-in, code)."""
    python, version = bench.runtime_python()
    tmp = tmp_path_factory.mktemp("layer")
    full = bench.build_layer(tmp / "full", full=True, python_version=version)
    shutil.copytree(full.parent, tmp / "pruned")
    pruned = tmp / "pruned" / "python"
    removed = layer.prune(pruned)
    code = bench.stage_code(tmp / "code")
    return python, full, pruned, removed, bench.runtime_standin(tmp / "runtime"), code


@pytest.fixture(scope="module")
def traces(layers, tmp_path_factory):
    python, full, pruned, _, runtime, code = layers
    event = bench.dry_run_event()
    with bench.aws(tmp_path_factory.mktemp("aws")) as env:
        return {
            name: bench.child(python, "trace", code, site, runtime, env, event)
            for name, site in (("full", full), ("pruned", pruned))
        }


def opened(trace: dict, site: Path) -> set[str]:
    """The files opened (the audit hook also sees attempts, e.g. a .pyc or an entry_points.txt that is
    not there: those are left out)."""
    return {p for p in trace["opened"] if (site / p).is_file()}


def test_nothing_pruned_is_ever_opened_and_the_pruned_layer_answers_the_same(layers, traces):
    _, full, pruned, removed, _, _ = layers
    opened_full = opened(traces["full"], full)
    assert len(opened_full) > 500  # the handlers' modules, botocore's service models, native extensions
    assert "kubernetes/client/api_client.py" in opened_full
    assert any(p.startswith("botocore/data/dynamodb/") for p in opened_full)
    assert not opened_full & set(removed), sorted(opened_full & set(removed))[:20]
    for name in ("full", "pruned"):
        t = traces[name]
        assert (t["status"], t["kube_status"], t["ec2_topology"], t["eks_error"]) == (
            200, 200, 0, "ResourceNotFoundException"
        ), name  # fmt: skip
    assert opened(traces["pruned"], pruned) == opened_full


def test_pruning_removes_the_asyncio_stack_and_the_unused_kubernetes_client_and_nothing_else(layers):
    _, full, pruned, removed, _, _ = layers
    assert (full / "kubernetes" / "aio").is_dir() and list(full.glob("aiohttp-*.dist-info"))  # not vacuous
    assert layer.size(full.parent) > 100_000_000
    assert not (pruned / "kubernetes" / "aio").exists()
    assert not (pruned / "kubernetes" / "client" / "api").exists()
    assert [p.name for p in (pruned / "kubernetes" / "client" / "models").iterdir()] == ["__init__.py"]
    for dist in layer.UNUSED_DISTRIBUTIONS:
        stem = dist.replace("-", "_")
        assert not list(pruned.glob(f"{stem}-*.dist-info")), dist
        assert not (pruned / stem).exists(), dist
    # every distribution left is whole, and its RECORD names only what is on disk
    for record in pruned.glob("*.dist-info/RECORD"):
        with record.open(newline="") as fh:
            for row in csv.reader(fh):
                assert (pruned / row[0]).exists(), (record.parent.name, row[0])
    kept = {p.relative_to(pruned).as_posix() for p in pruned.rglob("*") if p.is_file()}
    everything = {p.relative_to(full).as_posix() for p in full.rglob("*") if p.is_file()}
    assert kept | {r for r in removed if (full / r).is_file()} == everything


def test_the_pruned_layer_is_under_60_mb_with_boto3_and_botocore_at_the_pinned_pair(layers):
    _, _, pruned, _, _, _ = layers
    assert layer.size(pruned.parent) <= LIMIT, layer.size(pruned.parent)
    for dist in ("boto3", "botocore"):
        (info,) = pruned.glob(f"{dist}-*.dist-info")
        assert info.name == f"{dist}-{pins()[dist]}.dist-info"
        assert (pruned / dist / "__init__.py").exists()
    assert not list(pruned.glob("snapshot_restore_py*"))  # the runtime's registry must be the one used


def files(site: Path) -> set[str]:
    return {p.relative_to(site).as_posix() for p in site.rglob("*") if p.is_file()}


def test_a_build_of_the_same_pins_in_the_same_run_is_copied_from_the_first_not_installed_again(
    layers, tmp_path
):
    """The suite sets ``TOPOGOV_LAYER_CACHE`` to a folder of its own run (tests/conftest.py); a build
    that can reach no index (an empty wheelhouse) still gets the whole layer, from there; without the
    cache the same build fails: nothing to install from."""
    _, full, _, _, _, _ = layers
    assert os.environ.get("TOPOGOV_LAYER_CACHE")
    _, version = bench.runtime_python()  # the fixture's build: the same inputs
    (tmp_path / "no-wheels").mkdir()
    env = {**os.environ, "TOPOGOV_WHEELHOUSE": str(tmp_path / "no-wheels")}
    argv = [sys.executable, "-m", "infra.layer", "--full", "--python-version", version]
    subprocess.run([*argv, str(tmp_path / "again")], cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)
    assert files(tmp_path / "again" / "python") == files(full)
    # pruning a build made of the kept files' links leaves the kept files as they were
    pruned_argv = [a for a in argv if a != "--full"]
    subprocess.run(
        [*pruned_argv, str(tmp_path / "pruned")], cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL
    )
    assert not (tmp_path / "pruned" / "python" / "kubernetes" / "aio").exists()
    subprocess.run([*argv, str(tmp_path / "after")], cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)
    after = tmp_path / "after" / "python"
    assert files(after) == files(full)
    (record,) = after.glob("kubernetes-*.dist-info/RECORD")  # what pruning rewrote in its build
    assert "kubernetes/aio/__init__.py," in record.read_text()
    del env["TOPOGOV_LAYER_CACHE"]
    uncached = subprocess.run(
        [*argv, str(tmp_path / "uncached")], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert uncached.returncode != 0 and "No matching distribution" in uncached.stderr, uncached.stderr[-2000:]
