"""Vendor k8s.io/pod-security-admission's own fixtures as ``pod_security_fixtures.json``.

Run, with the module in the Go module cache (``go mod download k8s.io/pod-security-admission@v0.35.4``)::

    .venv/bin/python tests/unit/data/pod_security_fixtures.py \\
        /root/go/pkg/mod/k8s.io/pod-security-admission@v0.35.4

It reads ``test/testdata/{baseline,restricted}/v1.N/{pass,fail}/*.yaml`` of the newest ``v1.N`` of each
level (v1.35 in v0.35.4: the version ``latest`` resolves to), every file of it. A file is named
``strings.ToLower(checkID) + index`` (``test/fixtures_test.go``, ``TestFixtures``), ``base*`` being the
minimal valid pods; the check ID it exercises is taken from the IDs the fixture generators register in
``test/fixtures_*.go`` (``fixtureKey{... check: "..."}``), never guessed. Needs PyYAML (in the venv).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import yaml

OUT = Path(__file__).with_name("pod_security_fixtures.json")
VERSION = "v0.35.4"
REGISTERED = re.compile(r'fixtureKey\{[^}]*\bcheck:\s*"([A-Za-z_]+)"')
BASE = {"base", "base_linux", "base_windows"}  # the minimal valid pods: no check of their own


def registered_checks(module: Path) -> dict[str, str]:
    """lower-cased check ID -> check ID, for every ID a fixture generator registers."""
    ids = {
        m for f in sorted((module / "test").glob("fixtures_*.go")) for m in REGISTERED.findall(f.read_text())
    }
    by_lower = {i.lower(): i for i in ids}
    assert len(by_lower) == len(ids), f"check IDs differing only in case: {sorted(ids)}"
    return by_lower


def newest_version(level_dir: Path) -> str:
    versions = [p.name for p in level_dir.iterdir() if re.fullmatch(r"v1\.\d+", p.name)]
    return max(versions, key=lambda v: int(v.split(".")[1]))


def order(path: Path) -> tuple[str, int]:
    """``hostports2`` before ``hostports10``."""
    stem = path.stem.rstrip("0123456789")
    return stem, int(path.stem[len(stem) :] or -1)


def fixtures(module: Path) -> list[dict[str, Any]]:
    checks = registered_checks(module)
    out = []
    for level in ("baseline", "restricted"):
        version = newest_version(module / "test/testdata" / level)
        for expect in ("pass", "fail"):
            folder = module / "test/testdata" / level / version / expect
            for path in sorted(folder.glob("*.yaml"), key=order):
                stem = path.stem if path.stem in BASE else path.stem.rstrip("0123456789")
                check = None if stem in BASE else checks[stem]
                pod = yaml.safe_load(path.read_text())
                file = f"{expect}/{path.name}"
                out.append(
                    {
                        "level": level,
                        "version": version,
                        "expect": expect,
                        "file": file,
                        "check": check,
                        "pod": pod,
                    }
                )
    return out


def main(argv: list[str]) -> None:
    module = Path(argv[1])
    data = fixtures(module)
    source = json.dumps(f"k8s.io/pod-security-admission@{VERSION} test/testdata")
    lines = ",\n".join(json.dumps(f, separators=(",", ":")) for f in data)  # one fixture a line
    OUT.write_text(f'{{"source":{source},"fixtures":[\n{lines}\n]}}\n')
    print(f"{len(data)} fixtures -> {OUT}")


if __name__ == "__main__":
    main(sys.argv)
