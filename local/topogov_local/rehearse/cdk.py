"""The real CDK CLI (``node_modules/.bin/cdk``) pointed at the emulator with ``AWS_ENDPOINT_URL`` and
nothing else changed (:class:`Cdk`: synth, bootstrap, deploy, destroy, each run killed with its whole
tree), and the asset cache shared between rehearsals."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from topogov_local.processes import (
    record_child,
    spent,
    supervised,
)
from topogov_local.rehearse.emulator import ACCOUNT, CDK, REGION, ROOT, STACK, RehearsalError

# --- the CDK CLI -------------------------------------------------------------------------------------
_CDK_STARTS = threading.Lock()  # a run's start and a cancel, one at a time


def _stop_tree(proc: subprocess.Popen[str]) -> None:
    """SIGTERM to a run's supervisor: it SIGKILLs the CLI's tree and exits."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGTERM)


@dataclass
class CdkRun:
    args: list[str]
    seconds: float
    output: str


class Cdk:
    """The pinned CDK CLI (package.json) with ``AWS_ENDPOINT_URL`` pointing at the emulator at
    ``aws_url`` (``synth`` alone calls no AWS API)."""

    def __init__(self, aws_url: str, out: Path, log: Path) -> None:
        if not CDK.exists():
            raise RehearsalError("the CDK CLI is missing: run `make install` (npm ci)")
        self.aws_url = aws_url
        self.out = Path(out)
        self.log = Path(log)
        self.runs: list[CdkRun] = []
        self.current: subprocess.Popen[str] | None = None  # the run under way, if any
        self.cancelled = False

    def cancel(self) -> None:
        """Stop the run under way and refuse any later one (its caller's :meth:`wait` then raises).
        Each run is the CLI under the supervisor of :func:`topogov_local.processes.supervised`, so a
        SIGTERM to it takes the CLI's whole tree at once (node, the app's python, jsii's node): the
        pipe closes and :meth:`wait` returns within milliseconds, not when a synth would have ended."""
        with _CDK_STARTS:
            self.cancelled = True
            proc = self.current
        if proc is not None:
            _stop_tree(proc)

    def env(self) -> dict[str, str]:
        # no AWS or CDK setting of the caller's, but whether the CDK validates its templates at synth
        # (CDK_VALIDATION: the test run's is off, tests/conftest.py)
        env = {
            k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "CDK_")) or k == "CDK_VALIDATION"
        }
        env.update(
            {
                "AWS_ENDPOINT_URL": self.aws_url,
                "AWS_ACCESS_KEY_ID": "testing",
                "AWS_SECRET_ACCESS_KEY": "testing",
                "AWS_REGION": REGION,
                "AWS_DEFAULT_REGION": REGION,
                "JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION": "1",
                "CDK_DISABLE_VERSION_CHECK": "1",
                # No telemetry: the CLI would try AWS's endpoint (unreachable offline) and leave a
                # cdk-telemetry-*.json in the temporary directory per run (aws-cdk 2.1148.1,
                # lib/cli/telemetry/collect-telemetry.js, canCollectTelemetry)
                "CDK_DISABLE_CLI_TELEMETRY": "true",
                "PATH": f"{ROOT / '.venv' / 'bin'}:{os.environ.get('PATH', '')}",
            }
        )
        return env

    @staticmethod
    def context_args(context: Mapping[str, str]) -> list[str]:
        out: list[str] = []
        for key, value in context.items():
            out += ["-c", f"topogov:{key}={value}"]
        return out

    def start(self, *args: str) -> subprocess.Popen[str]:
        """Start ``cdk <args>`` (for a run that overlaps other work); finish it with :meth:`wait`."""
        self.log.parent.mkdir(parents=True, exist_ok=True)
        argv = supervised([str(CDK), *args])
        with _CDK_STARTS:  # a cancel() either sees this run or refuses it
            if self.cancelled:
                raise RehearsalError(f"cdk {' '.join(args)}: cancelled")
            proc = subprocess.Popen(
                argv,
                cwd=ROOT,
                env=self.env(),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                text=True,
                start_new_session=True,  # a terminal's Ctrl-C is the stack's to handle, not the CLI's
            )
            record_child(proc.pid, argv)
            proc.topogov_started = time.monotonic()  # type: ignore[attr-defined]
            proc.topogov_args = list(args)  # type: ignore[attr-defined]
            self.current = proc
        return proc

    def wait(self, proc: subprocess.Popen[str], timeout_s: float = 900) -> CdkRun:
        try:
            output, _ = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _stop_tree(proc)
            output, _ = proc.communicate()
        except BaseException:  # a stop signal raised in this thread: the CLI's tree goes too
            _stop_tree(proc)
            raise
        finally:
            if self.current is proc:
                self.current = None
        args = proc.topogov_args  # type: ignore[attr-defined]
        run = CdkRun(args, time.monotonic() - proc.topogov_started, output)  # type: ignore[attr-defined]
        self.runs.append(run)
        spent(f"cdk {args[0]}", run.seconds)
        with open(self.log, "a", encoding="utf-8") as fh:
            fh.write(f"$ cdk {' '.join(args)}   ({run.seconds:.1f} s, exit {proc.returncode})\n{output}\n")
        if proc.returncode != 0:
            raise RehearsalError(f"cdk {' '.join(args)} failed (exit {proc.returncode}):\n{output[-4000:]}")
        return run

    def run(self, *args: str, timeout_s: float = 900) -> CdkRun:
        return self.wait(self.start(*args), timeout_s)

    def synth(self, context: Mapping[str, str]) -> subprocess.Popen[str]:
        return self.start("synth", "--quiet", "--output", str(self.out), *self.context_args(context))

    def bootstrap(self) -> CdkRun:
        return self.run("bootstrap", f"aws://{ACCOUNT}/{REGION}", "--app", str(self.out))

    def deploy_assembly(self) -> CdkRun:
        return self.run("deploy", STACK, "--app", str(self.out), "--require-approval", "never")

    def deploy(self, context: Mapping[str, str]) -> CdkRun:
        """``cdk deploy`` of the app (synthesized again with ``context``)."""
        return self.run(
            "deploy",
            STACK,
            "--output",
            str(self.out),
            "--require-approval",
            "never",
            *self.context_args(context),
        )

    def diff(self) -> CdkRun:
        return self.run("diff", STACK, "--app", str(self.out))

    def destroy(self) -> CdkRun:
        return self.run("destroy", STACK, "--app", str(self.out), "--force")


# Assets CDK bundled, kept between synths: CDK reuses a staged asset whose directory exists in the
# output (the layer's pip install is the slowest part of a synth). Shared by every synth here.
ASSET_CACHE = ROOT / ".topogov" / "cdk-assets"


ASSETS_KEPT = 8  # the newest asset directories kept (a layer, function packages of a few policies)


def seed_assets(out: Path) -> None:
    """Hard-link the assets bundled by earlier synths into ``out`` (before ``cdk synth``)."""
    if not ASSET_CACHE.is_dir():
        return
    out.mkdir(parents=True, exist_ok=True)
    for asset in ASSET_CACHE.glob("asset.*"):
        target = out / asset.name
        if not target.exists():
            try:
                shutil.copytree(asset, target, copy_function=os.link)
            except OSError:  # pruned meanwhile by another synth: CDK bundles it again
                shutil.rmtree(target, ignore_errors=True)


def keep_assets(out: Path) -> None:
    """Keep the bundled assets of ``out``'s manifest for the next synth; of the cache, only the
    :data:`ASSETS_KEPT` most recently kept stay."""
    manifest = out / f"{STACK}.assets.json"
    if not manifest.exists():
        return
    wanted = {
        f["source"]["path"]
        for f in json.loads(manifest.read_text())["files"].values()
        if f["source"].get("packaging") == "zip"
    }
    ASSET_CACHE.mkdir(parents=True, exist_ok=True)
    for name in wanted:
        src, dest = out / name, ASSET_CACHE / name
        if dest.exists():
            os.utime(dest)
        elif src.is_dir():
            tmp = ASSET_CACHE / f".{name}.tmp-{os.getpid()}"
            try:
                shutil.copytree(src, tmp, copy_function=os.link)
                tmp.rename(dest)
            except OSError:
                shutil.rmtree(tmp, ignore_errors=True)
    cached = sorted(ASSET_CACHE.glob("asset.*"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in cached[ASSETS_KEPT:]:
        shutil.rmtree(old, ignore_errors=True)
