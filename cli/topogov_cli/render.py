"""Human-readable output shared by the commands."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from topogov.domain.labels import ZONE_ID_LABEL, layer_label


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    rows = [[str(c) for c in r] for r in rows]
    widths = [len(h) for h in headers]
    for r in rows:
        widths = [max(w, len(c)) for w, c in zip(widths, r, strict=True)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return "\n".join(lines)


def label_table(nodes: Iterable[Mapping[str, Any]], layers: int = 4) -> str:
    """Nodes with their topology labels, as ``kubectl get nodes -L ...`` shows them."""
    keys = [layer_label(i) for i in range(1, layers + 1)] + [ZONE_ID_LABEL]
    headers = ["NAME", "INSTANCE-TYPE", *(k.split("/")[1].upper() for k in keys)]
    rows = []
    for n in sorted(nodes, key=lambda o: o["metadata"]["name"]):
        labels = n["metadata"].get("labels") or {}
        rows.append(
            [
                n["metadata"]["name"],
                labels.get("node.kubernetes.io/instance-type", ""),
                *(labels.get(k, "") for k in keys),
            ]
        )
    return table(headers, rows)


def joined(parts: Sequence[str], width: int = 100, indent: int = 2) -> str:
    """``parts`` joined by `` · ``, broken between parts so no line passes ``width``."""
    import textwrap

    lines = [""]
    for part in parts:
        if len(part) > width - indent:  # a part longer than a line wraps on its own lines
            first = not lines[-1].strip()
            wrapped = textwrap.wrap(
                part, width, initial_indent="" if first else " " * indent, subsequent_indent=" " * indent * 2
            )
            lines = [*lines[:-1], *wrapped] if first else [*lines, *wrapped]
            lines.append(" " * indent)
            continue
        sep = " · " if lines[-1].strip() else ""
        if lines[-1].strip() and len(lines[-1]) + len(sep) + len(part) > width:
            lines.append(" " * indent + part)
        else:
            lines[-1] += sep + part
    return "\n".join(line for line in lines if line.strip())


def summary_line(s: Mapping[str, Any]) -> str:
    skipped = ", ".join(f"{k} {v}" for k, v in (s.get("skipped") or {}).items()) or "none"
    parts = [
        f"{s['mode']} pass",
        f"nodes {s['nodes_seen']}",
        f"ec2-backed {s['ec2_backed']}",
        f"with topology {s['with_topology']}",
        f"patched {s['patched']}",
        f"unchanged {s['unchanged']}",
        f"failed {s['failed']}",
        f"skipped: {skipped}",
        f"EC2 calls {s['ec2_calls']}",
        f"k8s reads {s['k8s_reads']} writes {s['k8s_writes']}",
        f"{s['duration_s']:.2f}s",
    ]
    if s.get("ec2_missing"):
        parts.append(f"not in EC2's answer: {len(s['ec2_missing'])}")
    if not s.get("complete", True):
        parts.append("INCOMPLETE (continues next pass)")
    return joined(parts)


def governor_line(g: Mapping[str, Any]) -> str:
    """One line for the governor part of a reconcile pass."""
    if g.get("skipped"):
        return f"governor: skipped ({g['skipped']})"
    counts = g["counts"]
    parts = [f"{counts[a]} {a}d" for a in ("create", "update", "delete")]
    parts += [f"{counts['hold']} held", f"{counts['unowned']} not ours", f"{counts['unchanged']} unchanged"]
    out = [
        f"governor ({g['api_version']}): " + ", ".join(parts),
        f"k8s reads {g['k8s_reads']} writes {g['k8s_writes']}",
    ]
    if g.get("failures"):
        out.append(f"FAILED {len(g['failures'])} (retried next pass)")
    return joined(out)


def tree_text(tree: Mapping[str, Any], depth: int | None = None) -> str:
    """The topology tree (``TopologyTree.to_json``) as indented lines, one per domain down to
    ``depth`` layers (default: all): its id, layer, node count and free GPUs (allocatable minus
    requested at the last pass), then the nodes without topology labels as one line."""
    lines = []

    def free(d: Mapping[str, Any]) -> int:
        return int(d["allocatable"]["gpu"]) - int(d["requested"]["gpu"])

    def emit(d: Mapping[str, Any], indent: int) -> None:
        gpus = f"{free(d)}/{d['allocatable']['gpu']} GPUs free" if d["allocatable"]["gpu"] else "no GPUs"
        name = f"{'  ' * indent}{d['id']}"
        lines.append(f"{name.ljust(30)}  layer-{d['layer']}  {d['node_count']:>5} nodes  {gpus}")
        if depth is None or d["layer"] < depth:
            for child in d.get("children") or []:
                emit(child, indent + 1)

    for root in tree.get("domains") or []:
        emit(root, 0)
    unplaced = tree.get("unplaced") or []
    if unplaced:
        shown = ", ".join(unplaced[:2]) + (f" and {len(unplaced) - 2} more" if len(unplaced) > 2 else "")
        lines.append(f"no topology labels: {len(unplaced)} nodes ({shown})")
    return "\n".join(lines) + "\n"
