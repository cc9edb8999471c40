"""What the api function's SnapStart priming imports: found in the code (``handlers/snapstart.py``
``first_use_imports``), not kept beside it by hand."""

from __future__ import annotations

from pathlib import Path

from topogov.handlers.snapstart import first_use_imports


def write(root: Path, module: str, text: str) -> None:
    path = root.joinpath(*module.split(".")).with_suffix(".py")
    path.parent.mkdir(parents=True, exist_ok=True)
    for parent in path.parents:
        if parent == root:
            break
        (parent / "__init__.py").touch()
    path.write_text(text)


def test_the_walk_follows_every_import_and_keeps_those_made_in_functions(tmp_path):
    write(tmp_path, "topogov.handlers.api", "from topogov import low\n\ndef handle():\n    import json\n")
    write(
        tmp_path,
        "topogov.low",
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from topogov.typed_only import T\n"
        "def f():\n    from topogov.late import g\n    from .sibling import h, i\n"
        "    from boto3.dynamodb import types\n",
    )
    write(tmp_path, "topogov.late", "def g():\n    import concurrent.futures\n")
    write(tmp_path, "topogov.sibling", "h = i = 1\n")
    write(tmp_path, "topogov.typed_only", "T = int\n")
    got = dict(first_use_imports("topogov.handlers.api", tmp_path))
    assert got["json"] == () and got["concurrent.futures"] == ()
    assert got["boto3.dynamodb"] == ("types",)
    assert got["topogov.late"] == ("g",) and got["topogov.sibling"] == ("h", "i")
    assert "topogov.low" in got and "topogov.handlers.api" in got  # reached: imported too
    assert "topogov.typed_only" not in got  # only under TYPE_CHECKING: never imported at run time


def test_the_api_functions_first_use_imports_include_what_a_dry_run_needs():
    got = dict(first_use_imports())
    for module in (
        "topogov.logic.admission",
        "topogov.logic.api_service",
        "topogov.adapters.kube_jobs",
        "kubernetes.client.api_client",
        "aws_lambda_powertools.utilities.idempotency",
    ):
        assert module in got, module
    assert "snapshot_restore_py" not in got and "topogov.handlers.reconcile" not in got
