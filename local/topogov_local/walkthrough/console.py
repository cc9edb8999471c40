"""What the walkthrough prints and runs: steps, ``kubectl`` and ``topogov`` commands shown as a user
would type them (and run for real: the ``kubectl`` binary, the CLI in-process against the local API),
waits on the API with a clear line when something does not happen, and nothing wider than 100
columns but what a command prints itself."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shlex
import shutil
import subprocess
import time
from collections.abc import Callable
from typing import Any

WIDTH = 100


class Console:
    def __init__(self, stack: Any, out: Callable[[str], None] | None = None) -> None:
        self.stack = stack
        self._out = out or (lambda text: print(text, flush=True))
        self.started = time.monotonic()

    # -- text ---------------------------------------------------------------------------------------
    def say(self, text: str = "") -> None:
        self._out(text)

    def step(self, n: int, title: str) -> None:
        self.say()
        self.say(f"== {n}. {title}")

    def note(self, text: str, indent: int = 0) -> None:
        """A sentence of the story, wrapped to the width (continuation lines indented by ``indent``)."""
        import textwrap

        lead = " " * (len(text) - len(text.lstrip(" ")))
        self.say(
            textwrap.fill(
                text.lstrip(" "), WIDTH, initial_indent=lead, subsequent_indent=lead + " " * indent,
                break_on_hyphens=False, break_long_words=False,
            )
        )  # fmt: skip

    def command(self, prompt: str, argv: list[str]) -> None:
        """A command as a shell would take it, broken with ``\\`` before it passes the width."""
        lines = [prompt]
        for word in (shlex.quote(a) for a in argv):
            if len(lines[-1]) + 1 + len(word) + 2 > WIDTH and lines[-1].strip():
                lines[-1] += " \\"
                lines.append("    " + word)
            else:
                lines[-1] += ("" if lines[-1].endswith((" ", "$ ")) or not lines[-1] else " ") + word
        for line in lines:
            self.say(line)

    # -- commands -----------------------------------------------------------------------------------
    def kubectl(self, *args: str, max_lines: int | None = None, show: bool = True) -> str:
        """Run ``kubectl`` with the local stack's admin kubeconfig (``$KUBECONFIG`` for the user)."""
        if show:
            self.command("$ ", ["kubectl", *args])
        exe = shutil.which("kubectl")
        if exe is None:
            self.say("(kubectl is not installed: `make kubectl` installs Debian's kubernetes-client)")
            return ""
        out = subprocess.run(
            [exe, "--kubeconfig", str(self.stack.kubeconfig), *args],
            capture_output=True,
            text=True,
            check=False,
        )
        text = (out.stdout or out.stderr).rstrip("\n")
        if show:
            self._lines(text, max_lines)
        return text

    def topogov(
        self,
        profile: str | None,
        *args: str,
        max_lines: int | None = None,
        show: bool = True,
        from_line: str | None = None,
    ) -> str:
        """Run the ``topogov`` CLI in-process as ``profile`` (a profile of the stack's credentials
        file) against the local API; print it as ``[team-a] $ topogov ...`` and its output. With
        ``profile`` None, a command that talks to the cluster and S3 (``governor``, ``reconcile``).
        ``from_line``: print only from the first line starting with it (``...`` for the rest)."""
        from topogov_cli.main import main

        prompt = f"[{profile.removeprefix('topogov-')}] $ " if profile else "$ "
        if show:
            self.command(prompt, ["topogov", *args])
        buf, err = io.StringIO(), io.StringIO()
        columns = os.environ.get("COLUMNS")
        os.environ["COLUMNS"] = str(WIDTH)  # the CLI wraps long values as on a 100-column terminal
        try:
            with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(err):
                code = main([*args, "--profile", profile] if profile else list(args))
        finally:
            if columns is None:
                os.environ.pop("COLUMNS", None)
            else:
                os.environ["COLUMNS"] = columns
        text = (buf.getvalue() + err.getvalue()).rstrip("\n")
        if show:
            self._lines(_from(text, from_line), max_lines)
        if code != 0 and show:
            self.say(f"(exit {code})")
        return text

    def _lines(self, text: str, max_lines: int | None) -> None:
        lines = text.splitlines()
        if max_lines and len(lines) > max_lines:
            lines = [*lines[:max_lines], f"... ({len(lines) - max_lines} more lines)"]
        for line in lines:
            self.say(line)

    # -- the API, silently (to wait on it) ----------------------------------------------------------
    def api(self, profile: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        from topogov_cli.sigv4 import credentials_for_profile, signed_request

        creds = credentials_for_profile(profile, str(self.stack.credentials))
        resp = signed_request(
            method, self.stack.api.url + path, credentials=creds, region="us-east-1", json_body=body
        )
        try:
            return resp.status_code, resp.json()
        except ValueError:
            return resp.status_code, resp.text

    def job(self, profile: str, team: str, name: str) -> dict[str, Any]:
        status, view = self.api(profile, "GET", f"/v1/jobs/{team}/{name}")
        return (
            view if status == 200 and isinstance(view, dict) else {"status": f"HTTP {status}", "error": view}
        )

    def wait_status(
        self, profile: str, team: str, name: str, statuses: tuple[str, ...], timeout_s: float = 240
    ) -> dict[str, Any]:
        """The job's view once its status is one of ``statuses``; on timeout a line saying what it
        is instead (and Kueue's reason), and the story goes on. (Kueue admits within seconds here;
        the bound is for a loaded machine, where a 60 s wait once ran out.)"""
        deadline = time.monotonic() + timeout_s
        view = self.job(profile, team, name)
        while view.get("status") not in statuses and time.monotonic() < deadline:
            time.sleep(0.25)
            view = self.job(profile, team, name)
        if view.get("status") not in statuses:
            why = view.get("why_pending") or json.dumps(view.get("error"))[:300]
            self.say(f"(!) {name} is still {view.get('status')} after {timeout_s:.0f}s: {why}")
        return view

    def timeline(
        self, profile: str, team: str, name: str, until: tuple[str, ...], timeout_s: float = 120
    ) -> list[tuple[str, float]]:
        """Poll the job and record each status change with the seconds since the call, until one of
        ``until``; printed as one line: ``Pending 0.0s -> Admitted 0.9s -> Running 1.4s``."""
        start = time.monotonic()
        seen: list[tuple[str, float]] = []
        while time.monotonic() - start < timeout_s:
            status = str(self.job(profile, team, name).get("status"))
            if not seen or seen[-1][0] != status:
                seen.append((status, time.monotonic() - start))
            if status in until:
                break
            time.sleep(0.2)
        self.say("  " + " -> ".join(f"{s} {t:.1f}s" for s, t in seen))
        return seen


def shown(path: Any) -> str:
    """``path`` relative to the working directory when it is under it (shorter, and what a user in
    that directory types), else absolute."""
    from pathlib import Path

    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _from(text: str, start: str | None) -> str:
    lines = text.splitlines()
    at = next((i for i, line in enumerate(lines) if start and line.startswith(start)), None)
    if at is None or at == 0:
        return text
    return "\n".join([f"... ({at} lines)", *lines[at:]])
