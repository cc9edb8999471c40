"""The local cluster's binaries, built from their Go modules on first use.

The pins are Go modules of this repository, one per upstream (``local/controlplane/*/go.mod`` and
``go.sum``): etcd (``go.etcd.io/etcd/server/v3``, the release Kubernetes 1.35.4 pins), Kubernetes
v1.35.4 (``kube-apiserver``, ``kube-controller-manager``, ``kube-scheduler``, ``kubectl``; the release
whose client libraries Kueue v0.17.0 uses; its staging modules are mapped to their published v0.35.4
by ``replace``), Kueue v0.17.0 (``cmd/kueue``), KWOK v0.8.0 (``cmd/kwok``, its own module: it needs
the 0.36 client libraries), JobSet v0.11.1 (the module's root package is its manager) and the Kubeflow
training operator v1.9.3 (a ``main.go`` of ours following upstream's ``cmd/training-operator.v1``,
without its certificate rotator). The last two have a module each because each builds against its
own controller-runtime (v0.22.4 and v0.19.1), whose webhook builder differs from the v0.23 Kueue's
module resolves. No binary and no upstream source is in the repository: ``go build`` fetches the
modules from the Go module proxy and verifies them against ``go.sum``.

Binaries go to ``$TOPOGOV_CACHE/controlplane/<pin hash>/bin`` (default ``~/.cache/topogov``),
the hash covering every pin file and the build flags, so a pin change builds again and nothing
else does. A lock file keeps two builds (parallel test workers, two terminals) from racing.
Version strings are stamped as the upstream release builds stamp them (Kubernetes'
``hack/lib/version.sh``, Kueue's and JobSet's Makefile ``LD_FLAGS``), so ``/version`` says ``v1.35.4``
(the training operator's build stamps nothing).

``python -m topogov_local.cluster.build`` builds whatever is missing, with progress, and prints the
directory (``make controlplane``).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

PINS = Path(__file__).resolve().parents[2] / "controlplane"  # local/controlplane
KUBERNETES_VERSION = "v1.35.4"
KUEUE_VERSION = "v0.17.0"
KWOK_VERSION = "v0.8.0"
JOBSET_VERSION = "v0.11.1"
TRAINING_OPERATOR_VERSION = "v1.9.3"
_STAMP_DATE = "2026-01-01T00:00:00Z"


def _k8s_ldflags() -> str:
    major, minor = KUBERNETES_VERSION.lstrip("v").split(".")[:2]
    flags = ["-s", "-w"]
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [
            f"-X {pkg}.gitVersion={KUBERNETES_VERSION}",
            f"-X {pkg}.gitMajor={major}",
            f"-X {pkg}.gitMinor={minor}",
            f"-X {pkg}.gitTreeState=clean",
            f"-X {pkg}.buildDate={_STAMP_DATE}",
        ]
    return " ".join(flags)


@dataclass(frozen=True)
class Tool:
    name: str
    module: str  # the folder under local/controlplane
    package: str
    ldflags: str


TOOLS = (
    Tool("etcd", "etcd", ".", "-s -w"),
    Tool("kube-apiserver", "kubernetes", "k8s.io/kubernetes/cmd/kube-apiserver", _k8s_ldflags()),
    Tool(
        "kube-controller-manager",
        "kubernetes",
        "k8s.io/kubernetes/cmd/kube-controller-manager",
        _k8s_ldflags(),
    ),
    Tool("kube-scheduler", "kubernetes", "k8s.io/kubernetes/cmd/kube-scheduler", _k8s_ldflags()),
    Tool("kubectl", "kubernetes", "k8s.io/kubernetes/cmd/kubectl", _k8s_ldflags()),
    Tool(
        "kueue",
        "kueue",
        "sigs.k8s.io/kueue/cmd/kueue",
        f"-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion={KUEUE_VERSION} "
        f"-X sigs.k8s.io/kueue/pkg/version.BuildDate={_STAMP_DATE[:10]}",
    ),
    Tool("kwok", "kwok", "sigs.k8s.io/kwok/cmd/kwok", "-s -w"),
    Tool(
        "jobset",
        "jobset",
        "sigs.k8s.io/jobset",
        f"-s -w -X sigs.k8s.io/jobset/pkg/version.GitVersion={JOBSET_VERSION}",
    ),
    Tool("training-operator", "training-operator", ".", "-s -w"),
)
# Kueue's own scheduler performance test (``test/performance/scheduler``), for ``topogov bench
# kueue-perf``; the Kueue pins already cover their imports. Built only when asked for, and not part
# of the pin hash's tool list, so adding them rebuilt nothing else.
PERF_TOOLS = (
    Tool("kueue-perf-runner", "kueue", "sigs.k8s.io/kueue/test/performance/scheduler/runner", "-s -w"),
    Tool("minimalkueue", "kueue", "sigs.k8s.io/kueue/test/performance/scheduler/minimalkueue", "-s -w"),
)


def _go() -> str:
    go = shutil.which("go")
    if go is None:
        raise RuntimeError(
            "the local cluster is built from Go modules and needs Go (1.26): `go` is not on PATH"
        )
    return go


def pin_hash() -> str:
    """A hash of every pin file and build flag (and of the Go release): the cache key."""
    h = hashlib.sha256()
    for path in sorted(p for p in PINS.rglob("*") if p.is_file() and p.suffix in (".mod", ".sum", ".go")):
        h.update(str(path.relative_to(PINS)).encode())
        h.update(path.read_bytes())
    for tool in TOOLS:
        h.update(f"{tool.name} {tool.package} {tool.ldflags}".encode())
    h.update(subprocess.run([_go(), "env", "GOVERSION"], capture_output=True, text=True).stdout.encode())
    return h.hexdigest()[:16]


def cache_root() -> Path:
    return Path(os.environ.get("TOPOGOV_CACHE") or Path.home() / ".cache" / "topogov")


def bin_dir() -> Path:
    return cache_root() / "controlplane" / pin_hash() / "bin"


def _go_env() -> dict[str, str]:
    env = dict(os.environ)
    flags = env.get("GOFLAGS", "")
    if "-buildvcs" not in flags:
        flags += " -buildvcs=false"
    env["GOFLAGS"] = (flags + " -mod=readonly").strip()
    env.setdefault("GOTOOLCHAIN", "local")
    return env


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive ``flock`` on ``path`` for the block: one builder at a time, others wait."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def missing(tools: tuple[Tool, ...] = TOOLS) -> list[Tool]:
    out = bin_dir()
    return [t for t in tools if not (out / t.name).is_file()]


def ensure_built(progress: Callable[[str], None] | None = None, tools: tuple[Tool, ...] = TOOLS) -> Path:
    """The directory of the binaries, building those of ``tools`` not built yet for these pins."""
    out = bin_dir()
    if not missing(tools):
        return out
    say = progress or (lambda line: print(line, file=sys.stderr, flush=True))
    with locked(out.parent / ".lock"):
        todo = missing(tools)  # another process may have built them while we waited
        for i, tool in enumerate(todo, start=1):
            say(
                f"building {tool.name} ({i}/{len(todo)}) from {tool.package} in "
                f"local/controlplane/{tool.module} (first build of these pins: minutes; later ones reuse "
                "Go's cache)"
            )
            started = time.monotonic()
            tmp = out / f".{tool.name}.tmp"
            out.mkdir(parents=True, exist_ok=True)
            proc = subprocess.run(
                [_go(), "build", "-trimpath", f"-ldflags={tool.ldflags}", "-o", str(tmp), tool.package],
                cwd=PINS / tool.module,
                env=_go_env(),
                capture_output=True,
                text=True,
            )
            if proc.returncode != 0:
                tmp.unlink(missing_ok=True)
                raise RuntimeError(f"go build {tool.package} failed:\n{proc.stderr[-4000:]}")
            tmp.replace(out / tool.name)
            say(f"built {tool.name} in {time.monotonic() - started:.0f} s")
    return out


def module_dir(module: str, version: str, pins: str) -> Path:
    """Where the Go module cache holds ``module@version`` (downloaded if it is not yet), read from
    the pin folder ``pins`` whose go.sum verifies it: for the manifests Kueue, KWOK, JobSet and the
    training operator ship."""
    proc = subprocess.run(
        [_go(), "mod", "download", "-json", f"{module}@{version}"],
        cwd=PINS / pins,
        env=_go_env(),
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"go mod download {module}@{version} failed: {proc.stderr[-2000:]}")
    return Path(json.loads(proc.stdout)["Dir"])


def main() -> int:
    try:
        out = ensure_built()
    except RuntimeError as exc:
        print(f"topogov: {exc}", file=sys.stderr)
        return 1
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
