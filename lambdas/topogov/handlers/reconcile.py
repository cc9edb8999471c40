"""Reconcile Lambda: a full pass on the schedule, a targeted pass when an instance starts running.

Thin: parse the event, run one labeler pass; on a full pass also the governor (Kueue objects from
the policy) and the ledger sync (releases, time-bounded fallbacks); publish summaries as logs and
metrics.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.metrics import MetricUnit, single_metric

from topogov.handlers.events import Ec2StateChangeEvent, parse_reconcile_event
from topogov.logic.labeler import Labeler, PassOptions, PassSummary
from topogov.observability import logger, metrics, traced
from topogov.settings import ReconcileSettings

if TYPE_CHECKING:
    from topogov.adapters.lease import DynamoLease, Held
    from topogov.bootstrap import Reconcile
    from topogov.logic.governor import GovernorSummary
    from topogov.logic.governor.addon import AddonReport
    from topogov.logic.ledger_sync import SyncSummary

_built: tuple[ReconcileSettings, Reconcile] | None = None


def built(cfg: ReconcileSettings) -> Reconcile:
    """Built on first use and reused while the container stays warm (EKS endpoint, token, pools);
    rebuilt only if the configuration changed (never in Lambda; the local stack and tests)."""
    global _built
    if _built is None or _built[0] != cfg:
        from topogov.bootstrap import build_reconcile

        _built = (cfg, build_reconcile(cfg))
    return _built[1]


def labeler(cfg: ReconcileSettings) -> Labeler:
    return built(cfg).labeler


def options_for(event: dict[str, Any], remaining_s: float, cfg: ReconcileSettings) -> PassOptions | None:
    parsed = parse_reconcile_event(event)
    deadline = time.monotonic() + max(0.0, remaining_s - cfg.budget_margin_s)
    if isinstance(parsed, Ec2StateChangeEvent):
        if parsed.detail.state != "running":
            return None
        return PassOptions(
            refresh_after_s=cfg.refresh_after_s,
            verify_after_s=cfg.verify_after_s,
            deadline=deadline,
            targeted_instance_ids=frozenset({parsed.detail.instance_id}),
        )
    return PassOptions(
        refresh_after_s=cfg.refresh_after_s, verify_after_s=cfg.verify_after_s, deadline=deadline
    )


def publish(summary: PassSummary) -> None:
    count = MetricUnit.Count
    # Start from an empty set: with POWERTOOLS_METRICS_DISABLED (local stack) flushing never clears it.
    metrics.clear_metrics()
    metrics.add_dimension(name="mode", value=summary.mode)
    for name, value in (
        ("NodesSeen", summary.nodes_seen),
        ("Ec2Backed", summary.ec2_backed),
        ("WithTopology", summary.with_topology),
        ("Patched", summary.patched),
        ("Unchanged", summary.unchanged),
        ("Failed", summary.failed),
        ("Ec2Calls", summary.ec2_calls),
        ("Ec2Retries", summary.ec2_retries),
        ("Ec2Missing", len(summary.ec2_missing)),
        ("Adopted", summary.adopted),  # answers taken from EKS's own labels (no EC2 call)
        ("Verified", summary.verified),  # adopted answers checked against EC2
        ("K8sReads", summary.k8s_reads),
        ("K8sWrites", summary.k8s_writes),
        ("Incomplete", 0 if summary.complete else 1),
        ("Completed", 1 if summary.complete else 0),  # its absence over a window is an alarm
        ("HyperPodMode", 1 if summary.cluster_mode == "hyperpod" else 0),
        ("HyperPodNodes", summary.hyperpod_nodes),
        ("UnavailableNodes", summary.unavailable),  # Kueue leaves them out (health, taints, cordon)
    ):
        metrics.add_metric(name=name, unit=count, value=value)
    for reason, value in summary.skipped.items():
        metrics.add_metric(name=f"Skipped_{reason}", unit=count, value=value)
    metrics.add_metric(name="DurationSeconds", unit=MetricUnit.Seconds, value=summary.duration_s)
    # the mode it ran in and why, in the pass's own line (domain/hyperpod/mode.py)
    logger.info(
        f"reconcile pass ({summary.cluster_mode} mode: {summary.cluster_mode_why})",
        extra={"summary": summary.to_json()},
    )
    if summary.warnings:
        logger.warning("cluster mode warnings", extra={"warnings": summary.warnings})


def publish_governor(gov: GovernorSummary | AddonReport) -> dict[str, Any]:
    """The governor's part of a pass as metrics (and its policy warnings as a log line)."""
    from topogov.logic.governor import Action  # loaded with the governor, not at cold start
    from topogov.logic.governor.addon import AddonReport

    if isinstance(gov, AddonReport):
        return publish_addon(gov)

    plan = gov.plan
    for name, value in (
        ("KueueCreated", plan.count(Action.CREATE)),
        ("KueueRecreated", plan.count(Action.RECREATE)),
        ("KueueUpdated", plan.count(Action.UPDATE)),
        ("KueueDeleted", plan.count(Action.DELETE)),
        ("KueueHeld", plan.count(Action.HOLD) + plan.count(Action.KEEP)),
        # an object not Topogov's is in the way: left alone, or blocking a flavor's re-creation
        ("KueueUnowned", plan.count(Action.UNOWNED) + plan.count(Action.BLOCKED)),
        ("KueueFailed", len(gov.failures)),
    ):
        metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)
    if plan.warnings:
        logger.warning("policy warnings", extra={"warnings": plan.warnings})
    return gov.to_json()


def publish_addon(report: AddonReport) -> dict[str, Any]:
    """HyperPod mode: the add-on's objects against teams.yaml (``logic/governor/addon.py``). ``AddonDrift``
    (its alarm) counts the objects not as teams.yaml would make them; nothing is written."""
    from topogov.logic.governor.addon import DIFFERS, MISSING, UNEXPECTED

    for name, value in (
        ("AddonDrift", len(report.drift)),
        ("AddonMissing", report.count(MISSING)),
        ("AddonDiffers", report.count(DIFFERS)),
        ("AddonUnexpected", report.count(UNEXPECTED)),
        ("KueueFailed", len(report.failures)),
    ):
        metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)
    if report.drift:
        logger.warning(
            "the task governance add-on's Kueue objects differ from teams.yaml",
            extra={"drift": [d.to_json() for d in report.drift]},
        )
    if report.warnings:
        logger.warning("policy warnings", extra={"warnings": report.warnings})
    return report.to_json()


def publish_ledger(ledger: SyncSummary) -> dict[str, Any]:
    """The ledger sync's part of a pass as metrics (per-team in-flight GPUs for the dashboard)."""
    released = ledger.released_finished + ledger.released_vanished + ledger.released_abandoned
    for name, value in (
        ("ChargesReleased", released),
        ("UnmanagedJobs", len(ledger.unmanaged_jobs)),
        ("TopologyFallbacks", len(ledger.fallbacks)),
    ):
        metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)
    from aws_lambda_powertools.metrics.functions import is_metrics_disabled

    # single_metric flushes on its own and ignores POWERTOOLS_METRICS_DISABLED: ask first.
    per_team = {} if is_metrics_disabled() else ledger.in_flight_gpu
    for team, gpus in per_team.items():  # the dashboard's per-team in-flight graph
        dims = {"service": "topogov", "team": team}
        with single_metric(
            name="InFlightGpu",
            unit=MetricUnit.Count,
            value=gpus,
            namespace="Topogov",
            default_dimensions=dims,
        ):
            pass
    if ledger.unmanaged_jobs:
        logger.warning("jobs not created through the API", extra={"jobs": ledger.unmanaged_jobs})
    return ledger.to_json()


@logger.inject_lambda_context(correlation_id_path="id")
@metrics.log_metrics
@traced
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    cfg = ReconcileSettings.from_env()  # validated on every invocation: ~50 us, and never stale
    options = options_for(event, context.get_remaining_time_in_millis() / 1000.0, cfg)
    if options is None:
        logger.info("ignored event", extra={"detail": event.get("detail")})
        metrics.clear_metrics()
        metrics.add_metric(name="IgnoredEvents", unit=MetricUnit.Count, value=1)
        return {"ignored": True}
    lease = lease_for(cfg)
    if lease is None:  # no counters table (a pass run by hand): nothing to share the cluster with
        return run_pass(cfg, options)
    remaining_s = context.get_remaining_time_in_millis() / 1000.0
    held = lease.acquire(context.aws_request_id, time.time(), remaining_s + LEASE_SLACK_S)
    if held is None:
        return skipped(lease, options)
    try:
        return run_under_lease(cfg, options, lease, held)
    except BaseException:
        lease.force_release(held)
        raise


# The lease outlives the invocation's own deadline by this much: a pass that dies frees the lease
# soon after Lambda would have stopped it, never while it may still run.
LEASE_SLACK_S = 5.0


def lease_for(cfg: ReconcileSettings) -> DynamoLease | None:
    """The lease of one pass at a time (adapters/lease.py) in the counters table, when configured."""
    global _lease
    if not cfg.counters_table:
        return None
    if _lease is None or _lease[0] != cfg:
        from topogov.adapters.lease import DynamoLease
        from topogov.bootstrap import aws_session, retrying

        _lease = (cfg, DynamoLease(retrying(aws_session(cfg.region), "dynamodb"), cfg.counters_table))
    return _lease[1]


_lease: tuple[ReconcileSettings, DynamoLease] | None = None


def skipped(lease: DynamoLease, options: PassOptions) -> dict[str, Any]:
    """Another pass holds the lease: leave this event's instances to it, and stop."""
    deferred = sorted(options.targeted_instance_ids or ())
    lease.defer(deferred)
    metrics.clear_metrics()
    metrics.add_metric(name="PassSkipped", unit=MetricUnit.Count, value=1)
    logger.info("another pass holds the lease", extra={"deferred": deferred})
    return {"skipped_pass": "another pass holds the lease", "deferred": deferred}


def run_under_lease(
    cfg: ReconcileSettings, options: PassOptions, lease: DynamoLease, held: Held
) -> dict[str, Any]:
    """This pass, then the instances deferred to it, until none is left or the time is up."""
    pending = held.pending
    if pending and options.targeted_instance_ids is not None:
        options = replace(options, targeted_instance_ids=options.targeted_instance_ids | pending)
        pending = frozenset()
    result = run_pass(cfg, options)
    deferred: list[dict[str, Any]] = []
    while True:
        if pending:
            metrics.flush_metrics()  # the last pass's, before the next one's publish starts afresh
            targeted = replace(options, targeted_instance_ids=pending)
            deferred.append(run_pass(cfg, targeted))
        if time.monotonic() >= options.deadline:
            lease.force_release(held)  # what is pending now waits for the next pass
            break
        pending = lease.release(held)
        if not pending:
            break
    if deferred:
        result["deferred_passes"] = deferred
    return result


def run_pass(cfg: ReconcileSettings, options: PassOptions) -> dict[str, Any]:
    wired = built(cfg)
    lab, sync, governor = wired.labeler, wired.ledger_sync, wired.governor
    outcome = lab.reconcile(options)
    publish(outcome.summary)
    result = outcome.summary.to_json()
    full = options.targeted_instance_ids is None
    if governor is not None and full:
        result["governor"] = publish_governor(governor(outcome.snapshot))
    if sync is not None and full:
        result["ledger"] = publish_ledger(sync())
    if full and outcome.pods is not None:
        result["placement"] = publish_placement(outcome.snapshot.placement)
    return result


def publish_placement(quality: dict[str, Any]) -> dict[str, Any]:
    """The fleet's placement quality as metrics: ``PlacementInOneDomain`` (percent of running
    multi-pod jobs inside one domain) per ``level``, overall and per ``team`` and ``mode``, and
    ``PlacementJobs`` (how many jobs the shares are of)."""
    from aws_lambda_powertools.metrics.functions import is_metrics_disabled

    metrics.add_metric(name="PlacementJobs", unit=MetricUnit.Count, value=quality.get("jobs", 0))
    if is_metrics_disabled():  # single_metric flushes on its own and ignores the switch
        return quality
    sets: list[tuple[dict[str, str], dict[str, Any]]] = [({}, quality)]
    sets += [({"team": t}, q) for t, q in (quality.get("teams") or {}).items()]
    sets += [({"mode": m}, q) for m, q in (quality.get("modes") or {}).items()]
    for extra, part in sets:
        for level, share in (part.get("in_one_domain") or {}).items():
            with single_metric(
                name="PlacementInOneDomain",
                unit=MetricUnit.Percent,
                value=round(100 * share, 1),
                namespace="Topogov",
                default_dimensions={"service": "topogov", "level": level, **extra},
            ):
                pass
    return quality
