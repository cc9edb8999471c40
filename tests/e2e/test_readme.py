"""The README's and its guides' commands run as written (issue 13): every ``bash`` block of
``README.md`` or ``docs/*.md`` marked ``<!-- readme-test: local-stack -->`` is run against a local
stack, command by command, in a directory laid out like a clone (``.venv``, ``examples``,
``teams.yaml``; the stack in ``.topogov/local``), each in bash with the block's ``export`` lines
before it. A command succeeds unless its comment says ``exit N``, then it must exit N. The two
commands themselves: ``make local`` is ``topogov local`` (test_cli.py runs it) and ``make test`` is
what CI runs; here their targets are checked to be what the README says."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.stacks import shared_stack

ROOT = Path(__file__).resolve().parents[2]
MARK = "<!-- readme-test: local-stack -->"
EXIT = re.compile(r"#\s*exit (\d+)")


def blocks(text: str, mark: str = MARK) -> list[str]:
    found = []
    for part in text.split(mark)[1:]:
        body = part.lstrip()
        assert body.startswith("```bash\n"), f"{mark} must be followed by a bash block: {body[:60]!r}"
        found.append(body[len("```bash\n") : body.index("\n```", 7)])
    return found


def commands(block: str) -> list[str]:
    """Commands of a block: continuation lines joined, a here-document kept whole, blank lines and
    whole-line comments dropped."""
    out: list[str] = []
    lines = block.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        cmd = line
        while cmd.rstrip().endswith("\\") and i < len(lines):
            cmd = cmd.rstrip()[:-1] + " " + lines[i].strip()
            i += 1
        heredoc = re.search(r"<<'?(\w+)'?", cmd)
        if heredoc:
            end = heredoc.group(1)
            while i < len(lines) and lines[i].strip() != end:
                cmd += "\n" + lines[i]
                i += 1
            cmd += "\n" + end
            i += 1
        out.append(cmd)
    return out


DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCKS = [b for doc in DOCUMENTS for b in blocks(doc.read_text())]
README_COMMANDS = [(i, c) for i, b in enumerate(BLOCKS) for c in commands(b)]


@pytest.fixture(scope="module")
def clone(shared_stacks):
    """A directory laid out like the repository, with a local stack in .topogov/local: the worker's
    stack of the API's kind (the links go with the module: the reset removes what is new there)."""
    with shared_stack(shared_stacks, "api") as stack:
        home = stack.dir.parent.parent
        for name in (".venv", "examples", "teams.yaml"):
            (home / name).symlink_to(ROOT / name)
        cwd = os.getcwd()
        os.chdir(home)  # the stack's files and the CLI's ./.topogov/local are relative to it
        try:
            yield home
        finally:
            os.chdir(cwd)
            for name in (".venv", "examples", "teams.yaml"):
                (home / name).unlink(missing_ok=True)


def test_the_readme_has_the_blocks_it_promises():
    assert len(BLOCKS) >= 3
    assert any(c.startswith("kubectl describe") for _, c in README_COMMANDS)
    assert any(c.startswith("topogov submit -f examples/") for _, c in README_COMMANDS)


@pytest.mark.parametrize(("block", "command"), README_COMMANDS, ids=lambda c: str(c).split("\n")[0][:70])
def test_a_readme_command_runs_as_written(clone, block, command):
    exports = [c for c in commands(BLOCKS[block]) if c.startswith("export ")]
    expected = int(m.group(1)) if (m := EXIT.search(command.split("\n")[0])) else 0
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "TOPOGOV_", "KUBECONFIG", "COLUMNS"))
    }
    script = "\n".join([*exports, command]) if not command.startswith("export ") else command
    out = subprocess.run(["bash", "-c", script], cwd=clone, env=env, capture_output=True, text=True,
                         timeout=120, check=False)  # fmt: skip
    assert out.returncode == expected, f"$ {command}\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}"
    assert "Traceback" not in out.stderr, out.stderr[-2000:]


def test_the_two_commands_are_the_targets_the_readme_names():
    dry = subprocess.run(
        ["make", "-n", "local", "test"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert dry.returncode == 0, dry.stderr
    assert ".venv/bin/topogov local" in dry.stdout and "pytest -n 2" in dry.stdout
    readme = (ROOT / "README.md").read_text()
    assert "make local" in readme and "make test" in readme
