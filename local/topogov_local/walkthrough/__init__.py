"""``topogov local``: the local stack, a walkthrough (labels, Kueue's objects, the API, jobs that run),
then reconcile passes on a schedule until stopped."""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import time
from typing import Any

from topogov_cli.common import EXIT_OK, EXIT_REFUSED, EXIT_USAGE
from topogov_cli.render import label_table, summary_line
from topogov_local.guard import StackError
from topogov_local.processes import StopOnSignal, Stopped
from topogov_local.walkthrough.console import Console, shown


def walkthrough(stack: Any) -> None:
    from topogov_local.walkthrough.api import burst, refusals
    from topogov_local.walkthrough.governor import governor
    from topogov_local.walkthrough.jobs import jobs, ledger
    from topogov_local.walkthrough.labeler import labeler
    from topogov_local.walkthrough.whatif import whatif

    c = Console(stack)
    if stack.options.hyperpod:  # topogov local --hyperpod
        from topogov_local.walkthrough.hyperpod import hyperpod_walkthrough

        hyperpod_walkthrough(c)
        return
    labeler(c)  # steps 1-6
    governor(c)  # 7
    if stack.api is None:
        return
    refusals(c)  # 8
    n = jobs(c, 9)  # 9-15
    ledger(c, n)
    burst(c, n + 1)
    whatif(c, n + 2)
    least_privilege(c, n + 3)


def least_privilege(c: Console, n_step: int) -> None:
    """What the functions did in AWS during the walkthrough, as IAM judged it."""
    record = c.stack.iam_record()
    c.step(n_step, "Least privilege, observed: the functions' AWS calls, judged against their deployed roles")
    for key, fn in sorted(c.stack.deployment.functions.items()):
        calls = record.calls.get(fn.principal, {})
        c.say(f"  the {key} function, role {fn.role_arn.rsplit('/', 1)[-1]}: {sum(calls.values())} calls")
        for action, count in sorted(calls.items()):
            c.say(f"    {action:<36} {count:>6}")
    c.say(f"  -> {record.allowed} allowed, {len(record.denied)} refused")


def _functions_log(stack: Any) -> str:
    """The functions' JSON logs go to a file, as Lambda sends them to CloudWatch Logs, so the story
    stays readable; the file is named once."""
    from topogov.observability import logger

    path = stack.dir / "logs" / "functions.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logger.registered_handler
    if isinstance(handler, logging.StreamHandler):
        handler.setStream(path.open("a", encoding="utf-8"))
    return str(path)


def deployed_lines(stack: Any) -> str:
    """What ``cdk deploy`` made and the functions use: the stack's outputs that name its resources."""
    from topogov_local.deployment import OUTPUT_OF

    rows = [f"  {key:<17} {stack.output(key)}" for key in OUTPUT_OF.values()]
    return "\n".join(["stack Topogov, deployed to the emulator by `cdk deploy`; the functions use:", *rows])


def run(args: argparse.Namespace) -> int:
    from topogov_local import fleet
    from topogov_local.deployment import assembled
    from topogov_local.stack import LocalStack, StackOptions

    options = StackOptions(
        directory=args.dir,
        fleet=args.fleet or fleet.DEFAULT_FLEET,
        extra_nodes=not args.no_extra_nodes,
        ec2_rate=args.ec2_rate,
        api_port=args.api_port,
        labelled_by_eks=getattr(args, "labelled_by_eks", False),
        hyperpod=getattr(args, "hyperpod", False),
        training_controllers=not getattr(args, "no_training_controllers", False),
    )
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "INFO")  # read when the Logger is created
    starting = "Starting the local stack (moto + `cdk deploy` of the app, etcd, Kubernetes, Kueue, KWOK) ..."
    print(starting, flush=True)
    if options.training_controllers:
        print("  with JobSet and the training operator (PyTorchJobs and JobSets run too)", flush=True)
    if not assembled():
        print("(the app is new or changed here: `cdk synth` first, 20 s to a minute)", flush=True)
    # A signal unwinds whatever runs now (a walkthrough step, a pass): the stack stops in `finally`,
    # its children within ProcessManager's grace. A closed terminal (SIGHUP) is a stop like Ctrl-C.
    with StopOnSignal() as signals:
        try:
            return _run(args, LocalStack(options), signals)
        except Stopped as stopped:  # sent again while the first was being caught; the stack stopped
            return _stopped_code(stopped.signum)


def start_dashboard(stack: Any, port: int) -> Any:
    """``topogov dashboard`` beside the stack, signed as its admin, and its URL, last of the story;
    None when the stack serves no API."""
    from topogov_cli.client import Api, Endpoint
    from topogov_cli.dashboard import serve

    if stack.api is None:
        return None
    api = Api(Endpoint(stack.api.url, "the local stack"), profile="topogov-admin")
    server = serve(api, port)
    print(f"\nThe dashboard (the fleet, teams, queue, jobs, what-if), signed as topogov-admin:\n"
          f"  {server.url}\n"
          f"  a team's view: topogov dashboard --profile topogov-team-a", flush=True)  # fmt: skip
    return server


def _stopped_code(signum: int) -> int:
    return 130 if signum == signal.SIGINT else 128 + signum


def _run(args: argparse.Namespace, stack: Any, signals: StopOnSignal) -> int:
    from topogov_local import events
    from topogov_local.walkthrough.labeler import invoke

    dashboard = None
    try:
        stack.start()
        os.environ.update(stack.env())
        os.environ["TOPOGOV_ENDPOINT"] = stack.api.url if stack.api else ""
        os.environ["AWS_SHARED_CREDENTIALS_FILE"] = str(stack.credentials)
        log = _functions_log(stack)
        endpoints = json.loads(stack.endpoints_file.read_text())
        print(f"ready: API {endpoints.get('api')} · Kubernetes {endpoints.get('kubernetes')}", flush=True)
        print(f"kubectl: export KUBECONFIG={shown(stack.kubeconfig)}", flush=True)
        print(deployed_lines(stack), flush=True)
        print(f"the functions' logs: {shown(log)}", flush=True)
        if args.no_walkthrough:
            print(summary_line(invoke(events.scheduled_event())), flush=True)
        else:
            walkthrough(stack)
        dashboard = start_dashboard(stack, getattr(args, "dashboard_port", 0))
        if args.once:
            print("\nWalkthrough done (--once): stopping the stack.", flush=True)
            return EXIT_OK
        print(f"\nReconciling every {args.interval:g}s; Ctrl-C stops the stack.", flush=True)
        while True:
            time.sleep(args.interval)
            summary = invoke(events.scheduled_event())
            print(summary_line(summary), flush=True)
            if summary.get("patched"):
                print(label_table(stack.kube().request("GET", "/api/v1/nodes").body["items"]), flush=True)
    except Stopped as stopped:
        signals.unwinding()
        print(f"\n{signal.Signals(stopped.signum).name}: stopping the stack", flush=True)
        return _stopped_code(stopped.signum)
    except StackError as exc:
        print(f"topogov local: {exc}", file=sys.stderr, flush=True)
        return EXIT_USAGE
    except Exception as exc:  # a step failed: one line here, the traceback in the stack's logs
        import traceback

        error_log = stack.dir / "logs" / "walkthrough-error.log"
        error_log.parent.mkdir(parents=True, exist_ok=True)
        error_log.write_text(traceback.format_exc())
        print(f"topogov local: the walkthrough failed: {type(exc).__name__}: {exc} "
              f"(traceback in {shown(error_log)})", file=sys.stderr, flush=True)  # fmt: skip
        return EXIT_REFUSED
    finally:
        signals.unwinding()
        if dashboard is not None:
            dashboard.stop()
        stack.stop()
        sys.stdout.flush()
