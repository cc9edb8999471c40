"""``topogov topology --format svg``: the topology tree (its JSON form) as a Graphviz picture.

The DOT source is built here; the picture is drawn by Graphviz's ``dot`` program, which must be on
``PATH`` (``apt-get install graphviz``, ``brew install graphviz``). Nothing else needs it.
"""

from __future__ import annotations

import itertools
import shutil
import subprocess
from collections.abc import Mapping
from typing import Any

MAX_NODE_LEAVES = 256  # above this many nodes, domains show node counts instead of one box per node


class DotMissing(Exception):
    """Graphviz's ``dot`` is not installed."""


DOT_MISSING = (
    "--format svg needs Graphviz's `dot`, which is not on PATH: install Graphviz "
    "(apt-get install graphviz, brew install graphviz), or use --format mermaid or json"
)


def dot_path() -> str | None:
    return shutil.which("dot")


def _q(*lines: str) -> str:
    """A quoted DOT string, one label line per argument."""
    return '"' + "\\n".join(t.replace("\\", "\\\\").replace('"', '\\"') for t in lines) + '"'


def _capacity(domain: Mapping[str, Any]) -> str:
    alloc = domain.get("allocatable") or {}
    used = domain.get("requested") or {}
    gpus = int(alloc.get("gpu", 0))
    count = domain.get("node_count", 0)
    text = f"{count} node{'s' if count != 1 else ''}"
    if gpus:
        text += f" · {gpus} GPU, {gpus - int(used.get('gpu', 0))} free"
    return text


def to_dot(doc: Mapping[str, Any], title: str = "Cluster") -> str:
    """DOT for the tree of ``GET /v1/topology`` (or ``TopologyTree.to_json()``): one box per domain
    with its node count and GPUs (total, free), nodes as leaves when there are few."""
    lines = [
        "digraph topology {",
        "  rankdir=LR;",
        "  ranksep=0.6; nodesep=0.08;",
        '  node [shape=box, style="rounded,filled", fillcolor="#eef3fb", fontname="Helvetica"];',
        f'  root [label={_q(title)}, fillcolor="#d6e2f5"];',
    ]
    domains = list(doc.get("domains") or [])
    total_nodes = sum(int(d.get("node_count", 0)) for d in domains)
    leaves = total_nodes <= MAX_NODE_LEAVES
    counter = itertools.count()

    def emit(domain: Mapping[str, Any], parent: str) -> None:
        me = f"d{next(counter)}"
        label = _q(f"Layer {domain.get('layer')}: {domain.get('id')}", _capacity(domain))
        lines.append(f"  {me} [label={label}];")
        lines.append(f"  {parent} -> {me};")
        for child in domain.get("children") or []:
            emit(child, me)
        if leaves:
            for name in domain.get("nodes") or []:
                leaf = f"n{next(counter)}"
                lines.append(f'  {leaf} [label={_q(name)}, shape=ellipse, fillcolor="#ffffff"];')
                lines.append(f"  {me} -> {leaf};")

    for domain in domains:
        emit(domain, "root")
    unplaced = list(doc.get("unplaced") or [])
    if unplaced:
        lines.append(
            f'  unplaced [label={_q(f"No topology labels: {len(unplaced)} nodes")}, fillcolor="#f5e6d6"];'
        )
        lines.append("  root -> unplaced;")
    lines.append("}")
    return "\n".join(lines) + "\n"


def render_svg(doc: Mapping[str, Any], timeout: float = 120) -> str:
    """The SVG picture of the tree; raises ``DotMissing`` without Graphviz, ``RuntimeError`` when
    ``dot`` fails."""
    exe = dot_path()
    if exe is None:
        raise DotMissing(DOT_MISSING)
    out = subprocess.run(
        [exe, "-Tsvg"], input=to_dot(doc), capture_output=True, text=True, timeout=timeout, check=False
    )
    if out.returncode != 0:
        raise RuntimeError(f"dot failed (exit {out.returncode}): {out.stderr.strip()[:300]}")
    return out.stdout


__all__ = ["DOT_MISSING", "DotMissing", "dot_path", "render_svg", "to_dot"]
