"""The rehearsal's report, as ``make rehearse`` prints it."""

from __future__ import annotations

from typing import Any


def render(report: dict[str, Any]) -> list[str]:
    out = ["", f"== cdk deploy rehearsal ({report.get('mode', '?')}) =="]
    phases = report.get("phases") or {}
    if phases:
        out.append("wall time per phase (s): " + ", ".join(f"{k} {v}" for k, v in phases.items()))
    cdk = report.get("cdk_seconds") or {}
    if cdk:
        out.append("cdk CLI runs (s): " + ", ".join(f"{k} {v}" for k, v in cdk.items()))
    for line in report.get("deployed") or []:
        out.append(f"deployed: {line}")
    upgrade = report.get("upgrade") or {}
    if upgrade:
        replaced = upgrade.get("replaced") or {}
        out.append(f"upgrade: {upgrade.get('changes', '?')} changes; replaced {len(replaced)}:")
        for name, what in replaced.items():
            out.append(f"  {what['type']} {name} ({what['replacement']}: {', '.join(what['causes'])})")
        in_place = len(upgrade.get("updated_in_place") or {})
        added, removed = len(upgrade.get("added") or []), len(upgrade.get("removed") or [])
        out.append(f"  updated in place: {in_place}; added {added}; removed {removed}")
        for label in ("added", "removed"):
            for name in upgrade.get(label) or []:
                out.append(f"  {label} {name}")
        if upgrade.get("retained"):
            out.append(f"  kept (Retain) instead of deleted: {', '.join(upgrade['retained'])}")
        for name, kind in (upgrade.get("updated_in_place") or {}).items():
            out.append(f"  updated in place {kind} {name}")
    layer = report.get("layer_only_upgrade") or {}
    if layer:
        live = layer.get("live") or {}
        out.append(
            f"layer-only upgrade: replaced {', '.join(layer.get('replaced') or []) or 'nothing'}; "
            f"added {', '.join(layer.get('added') or []) or 'nothing'}; "
            f"live {live.get('before')} -> {live.get('after')}"
        )
    private = report.get("private_new_account") or {}
    if private:
        runs = ", ".join(f"{k} {v}" for k, v in (private.get("cdk_seconds") or {}).items())
        out.append(
            f"private variant, {private.get('concurrency_limit')}-execution account: {private.get('status')} "
            f"(cdk CLI runs (s): {runs})"
        )
    destroy = report.get("destroy") or {}
    if destroy:
        out.append(f"destroy: retained {', '.join(destroy.get('retained') or []) or 'nothing'}")
    for role in report.get("roles") or []:
        out.append(f"role {role['role']} ({role['granted']} grants, {len(role['denied'])} denied calls):")
        for used in role["used"]:
            out.append(
                f"  used    {used['sid']}: {used['action']} on {used['resource']} ({used['calls']} calls)"
            )
        for unused in role["unused"]:
            why = unused.get("why", "")
            out.append(f"  UNUSED  {unused['sid']}: {unused['action']} on {unused['resource']}  {why}")
        for denied in role["denied"]:
            out.append(f"  DENIED  {denied['action']} on {denied['resource']}")
    for group in report.get("rbac") or []:
        out.append(f"rbac {group['group']} ({group['rules']} rules, {len(group['forbidden'])} refused):")
        for rule, n in group["used"].items():
            out.append(f"  used    {rule} ({n})")
        for rule in group["unused"]:
            why = (group.get("why") or {}).get(rule, "")
            out.append(f"  UNUSED  {rule}  {why}")
        for label in group["uncovered"]:
            out.append(f"  UNCOVERED {label}")
    return out
