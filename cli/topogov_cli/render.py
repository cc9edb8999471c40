"""Human-readable output shared by the commands."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from topogov.domain.labels import INSTANCE_TYPE_LABEL, ZONE_ID_LABEL, layer_label


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    rows = [[str(c) for c in r] for r in rows]
    widths = [len(h) for h in headers]
    for r in rows:
        widths = [max(w, len(c)) for w, c in zip(widths, r, strict=True)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return "\n".join(lines)


def fitted_table(
    headers: Sequence[str], rows: Iterable[Sequence[Any]], width: int | None, optional: Sequence[str]
) -> str:
    """``table``, leaving out the ``optional`` columns (in that order) while it is wider than
    ``width`` (None: never), with a note naming what was left out."""
    body: list[list[Any]] = [list(r) for r in rows]
    keep = list(headers)
    dropped: list[str] = []
    text = table(keep, body)
    for name in optional:
        if width is None or max(len(line) for line in text.splitlines()) <= width:
            break
        i = keep.index(name)
        keep.pop(i)
        body = [r[:i] + r[i + 1 :] for r in body]
        dropped.append(name)
        text = table(keep, body)
    if dropped:
        text += f"\n({', '.join(dropped)} left out to fit {width} columns; --output json has every field)"
    return text


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
                labels.get(INSTANCE_TYPE_LABEL, ""),
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
    if s.get("cluster_mode") == "hyperpod":  # domain/hyperpod/mode.py: no label written, no EC2 asked
        parts[0] += (
            f" (HyperPod mode: {s.get('hyperpod_nodes', 0)} HyperPod nodes, "
            f"{s.get('unavailable', 0)} unavailable)"
        )
    if s.get("ec2_missing"):
        parts.append(f"not in EC2's answer: {len(s['ec2_missing'])}")
    if not s.get("complete", True):
        parts.append("INCOMPLETE (continues next pass)")
    return joined(parts)


def governor_line(g: Mapping[str, Any]) -> str:
    """One line for the governor part of a reconcile pass."""
    if g.get("skipped"):
        return f"governor: skipped ({g['skipped']})"
    if g.get("mode") == "hyperpod":  # logic/governor/addon.py: the add-on's objects, nothing written
        c = g["counts"]
        return joined(
            [
                f"governor, HyperPod mode ({g['api_version']}): the add-on's objects against teams.yaml: "
                f"{g['matching']} of {g['expected']} as expected, {c['missing']} missing, "
                f"{c['differs']} differ, {c['unexpected']} unexpected",
                f"k8s reads {g['k8s_reads']} writes {g['k8s_writes']}",
            ]
        )
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


def capacity_text(view: Mapping[str, Any], top: int = 3) -> str:
    """Per GPU instance type, one row per layer (domains, wholly free, largest job now / on an empty
    fleet, in whole nodes) and the ``top`` domains with the most free GPUs of the deepest layer."""
    lines = []
    stamp = view.get("generated_at")
    if isinstance(stamp, int | float):  # the snapshot's epoch seconds
        import datetime as dt

        stamp = dt.datetime.fromtimestamp(stamp, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    if stamp:
        lines.append(f"as of {stamp} (the snapshot of the reconcile pass)")
    for t in view.get("instance_types") or []:
        gpn = t["gpus_per_node"]
        out = t.get("unavailable_nodes") or 0
        lines.append(
            f"{t['instance_type']}: {t['nodes']} nodes, {t['free_gpus']} of {t['nodes'] * gpn} GPUs free"
            + (f" ({out} not Ready, cordoned or tainted)" if out else "")
        )
        rows = [
            [lv["level"], lv["domains"], lv["wholly_free"], f"{lv['largest_now_nodes']} nodes",
             f"{lv['largest_empty_nodes']} nodes"]
            for lv in t["levels"]
        ]  # fmt: skip
        headers = ["LAYER", "DOMAINS", "WHOLLY FREE", "LARGEST JOB NOW", "IF EMPTY"]
        lines += ["  " + line for line in table(headers, rows).splitlines()]
        deepest = t["levels"][-1] if t["levels"] else None
        if deepest:
            line = f"  most free GPUs at {deepest['level']}:"
            for i, d in enumerate(deepest["free"][:top]):
                item = f" {d['domain']} {d['free_gpus']}" + (
                    "," if i < min(top, len(deepest["free"])) - 1 else ""
                )
                if len(line) + len(item) > 100:  # break between domains, never inside one
                    lines.append(line)
                    line = "   "
                line += item
            lines.append(line)
    if not view.get("instance_types"):
        lines.append("no GPU nodes with topology labels")
    return "\n".join(lines) + "\n"


def placement_line(quality: Mapping[str, Any]) -> str:
    """``placement: 5 running multi-pod jobs, in one domain: layer-1 100%, layer-2 80%, layer-3 40%``
    and the same per requested mode."""

    def shares(q: Mapping[str, Any]) -> str:
        levels = sorted((q.get("in_one_domain") or {}).items())
        return ", ".join(f"{lv} {round(100 * v)}%" for lv, v in levels)

    jobs = quality.get("jobs", 0)
    if not jobs:
        return "placement: no running multi-pod job"
    plural = "s" if jobs != 1 else ""
    head = f"placement: {jobs} running multi-pod job{plural}, in one domain: {shares(quality)}"
    by_mode = sorted((quality.get("modes") or {}).items())
    modes = [f"{m} ({q.get('jobs', 0)}): {shares(q)}" for m, q in by_mode]
    return joined([head, *modes])
