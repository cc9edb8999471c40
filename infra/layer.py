"""The dependencies layer: ``pip install`` of ``requirements/runtime.txt`` for the functions' platform,
then what no function imports is taken out (``UNUSED_DISTRIBUTIONS``, ``UNUSED_PATHS``).

Proven, not assumed: ``tests/infra/test_layer.py`` runs both handlers - their import, every module the
service names in an import statement, a dry run and a Kubernetes request - in a fresh interpreter whose
path is the code and the full layer only, records every file they open, and checks that nothing
removed here was opened; then runs the same on the pruned layer.

    python -m infra.layer DEST [--full] [--python-version 3.12]   # what the bundling writes to DEST

The CDK asset's hash is :func:`digest`: the pins, the platform and this module's lists, so the layer
is rebuilt exactly when one of them changes.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import os
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from infra.names import PIP_PLATFORM, PYTHON_VERSION

ROOT = Path(__file__).resolve().parents[1]
REQUIREMENTS = ROOT / "requirements" / "runtime.txt"

# Distributions pip installs as dependencies that no function imports (by distribution name).
UNUSED_DISTRIBUTIONS: dict[str, str] = {
    name: "kubernetes' asyncio client (kubernetes.aio) only; the functions use the synchronous ApiClient"
    for name in (
        "aiohttp",
        "aiohttp-retry",
        "aiohappyeyeballs",
        "aiosignal",
        "attrs",
        "frozenlist",
        "multidict",
        "propcache",
        "yarl",
    )
}

# Parts of distributions the functions use that they never import (globs under the layer's python/).
UNUSED_PATHS: dict[str, str] = {
    "kubernetes/aio": "the asyncio client (41 MB); the functions use kubernetes.client.ApiClient",
    "kubernetes/client/api": "the generated CoreV1Api & co.: adapters/kube.py speaks raw paths through "
    "ApiClient, and kubernetes.client loads these lazily, by attribute, only",
    "kubernetes/client/models/[a-z]*.py": "the generated models (loaded lazily by attribute, never by "
    "the functions, which parse JSON themselves); models/__init__.py stays, ApiClient imports it",
    "kubernetes/**/*_test.py": "the kubernetes client's own tests",
    "kubernetes/dynamic/test_*.py": "the kubernetes client's own tests",
    "websocket/tests": "websocket-client's own tests",
    "bin": "console scripts (wsdump, normalizer, jp.py): nothing runs them in Lambda",
}

# Never in the layer, whatever pulls it in: the runtime's own copy must be the one imported.
RUNTIME_PROVIDED = {
    "snapshot-restore-py": "SnapStart's hook registry: Lambda's Python runtime ships it and runs the hooks "
    "registered in *its* module; a copy in the layer would shadow it"
}


def _norm(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def digest() -> str:
    """The layer asset's hash: the pins, the target and what is pruned."""
    h = hashlib.sha256(REQUIREMENTS.read_bytes())
    spec = [PIP_PLATFORM, PYTHON_VERSION, sorted(UNUSED_DISTRIBUTIONS), sorted(UNUSED_PATHS)]
    h.update(json.dumps([*spec, sorted(RUNTIME_PROVIDED)]).encode())
    return h.hexdigest()


def pip_install(site: Path, *, python_version: str = PYTHON_VERSION, platform: str = PIP_PLATFORM) -> None:
    """The pinned requirements as wheels for the Lambda platform (``--only-binary``: no build, no Docker).
    Without network access, point ``TOPOGOV_WHEELHOUSE`` at a directory of those wheels
    (``pip download --platform manylinux2014_x86_64 --only-binary=:all: --python-version 3.12 -r ...``).

    With ``TOPOGOV_LAYER_CACHE=DIR`` an install is kept in ``DIR`` under the hash of what it was made
    from (the pins' file, the platform, the Python version), and the next build of the same inputs
    links its files from there instead of running pip again. Unset (a deploy), pip runs every time:
    the unpinned dependencies of the pins resolve as of the build. The test suite sets it to a
    folder of its own run, so the builds of one run share one pip install."""
    cache = os.environ.get("TOPOGOV_LAYER_CACHE")
    if not cache:
        _pip_install(site, python_version=python_version, platform=platform)
        return
    key = hashlib.sha256(REQUIREMENTS.read_bytes())
    key.update(json.dumps([platform, python_version]).encode())
    kept = Path(cache) / key.hexdigest()[:16]
    if not kept.is_dir():
        Path(cache).mkdir(parents=True, exist_ok=True)
        building = Path(cache) / f".{kept.name}-{os.getpid()}"
        shutil.rmtree(building, ignore_errors=True)
        _pip_install(building, python_version=python_version, platform=platform)
        try:
            building.rename(kept)  # atomic: another build of the same inputs sees all of it or none
        except OSError:  # another process kept the same install first
            shutil.rmtree(building, ignore_errors=True)
    shutil.copytree(kept, site, symlinks=True, dirs_exist_ok=True, copy_function=_link_or_copy)


def _link_or_copy(src: str, dst: str) -> None:
    """A hard link to the kept file (nothing writes a layer's files in place: :func:`prune` unlinks,
    and replaces a RECORD whole), a copy where the cache is on another file system."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _pip_install(site: Path, *, python_version: str, platform: str) -> None:
    wheelhouse = os.environ.get("TOPOGOV_WHEELHOUSE")
    offline = ["--no-index", "--find-links", wheelhouse] if wheelhouse else []
    subprocess.run(
        [
            sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
            "--platform", platform, "--implementation", "cp", "--python-version", python_version,
            "--only-binary=:all:", "--target", str(site), "-r", str(REQUIREMENTS), *offline,
        ],
        check=True,
    )  # fmt: skip
    for junk in site.rglob("__pycache__"):  # compiled for the build machine's Python, not the runtime's
        shutil.rmtree(junk, ignore_errors=True)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def prune(site: Path) -> list[str]:
    """Take out :data:`UNUSED_DISTRIBUTIONS` (every file of their RECORD, and their metadata),
    :data:`RUNTIME_PROVIDED` and :data:`UNUSED_PATHS`; keep the RECORD of the distributions left
    true to what is on disk. Returns what was removed (paths relative to ``site``), sorted."""
    removed: set[str] = set()
    root = site.resolve()
    drop = {_norm(n) for n in (*UNUSED_DISTRIBUTIONS, *RUNTIME_PROVIDED)}
    for dist in list(metadata.distributions(path=[str(site)])):
        if _norm(dist.metadata["Name"]) not in drop:
            continue
        for f in dist.files or ():  # the RECORD: the package, its metadata (RECORD included), scripts
            path = (site / f).resolve()
            if root in path.parents and path.exists():
                _remove(path)
                removed.add(str(path.relative_to(root)))
    for pattern in UNUSED_PATHS:
        for path in sorted(site.glob(pattern), reverse=True):
            rel = str(path.relative_to(site))
            if path.is_dir():
                removed.update(str(p.relative_to(site)) for p in path.rglob("*") if p.is_file())
            removed.add(rel)
            _remove(path)
    for d in sorted((p for p in site.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
        if not any(d.iterdir()):
            d.rmdir()  # packages left empty by the removals above
    for record in site.glob("*.dist-info/RECORD"):
        with record.open(newline="") as fh:
            rows = list(csv.reader(fh))
        kept = [r for r in rows if r and ((site / r[0]).exists() or r[0].endswith("/RECORD"))]
        if len(kept) != len(rows):  # a new file put in its place: the old one may be a cached copy's link
            fresh = record.with_name("RECORD.new")
            with fresh.open("w", newline="") as fh:
                csv.writer(fh, lineterminator="\n").writerows(kept)
            fresh.replace(record)
    return sorted(removed)


def bundle(out: Path, *, full: bool = False, python_version: str = PYTHON_VERSION) -> list[str]:
    """The layer's content in ``out`` (its ``python/`` folder, as Lambda expects); ``full``: without
    pruning (what the layer was before it was pruned; the benchmarks compare both)."""
    site = out / "python"
    pip_install(site, python_version=python_version)
    return [] if full else prune(site)


def size(out: Path) -> int:
    """Bytes of every file under ``out`` (what Lambda's 250 MB unzipped limit counts)."""
    return sum(p.stat().st_size for p in out.rglob("*") if p.is_file() and not p.is_symlink())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m infra.layer", description=__doc__.split("\n\n")[0])
    parser.add_argument("dest", type=Path)
    parser.add_argument("--full", action="store_true", help="do not prune (the layer as it was)")
    parser.add_argument("--python-version", default=PYTHON_VERSION)
    args = parser.parse_args(argv)
    removed = bundle(args.dest, full=args.full, python_version=args.python_version)
    print(json.dumps({"bytes": size(args.dest), "removed": len(removed)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
