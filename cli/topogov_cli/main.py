"""``topogov`` — the command line: one module per command group, registered here; groups other
distributions add come in through the ``topogov.commands`` entry point (topogov-local adds
``local`` and ``bench``). Subcommands import what they need only when they run."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from topogov_cli.common import ENDPOINT_HELP, EXIT_CODES_HELP, EXIT_OK, Parser


def plugin_commands() -> list[Callable[[Any], None]]:
    """Command groups other distributions add (entry point group ``topogov.commands``): the local
    stack's ``local`` and ``bench`` when topogov-local is installed."""
    from importlib.metadata import entry_points

    return [ep.load() for ep in sorted(entry_points(group="topogov.commands"), key=lambda e: e.name)]


def parser() -> argparse.ArgumentParser:
    from topogov_cli import governor, jobs, policy, reconcile, submit, teams, topology

    p = Parser(
        prog="topogov",
        description="Topology-aware task governance for GPU clusters on Amazon EKS.",
        epilog=f"{EXIT_CODES_HELP}\n\n{ENDPOINT_HELP}\n\n'topogov COMMAND --help' for a command's flags.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for group in (submit, jobs, teams, topology, reconcile, policy, governor):
        group.add_parser(sub)
    for add in plugin_commands():  # e.g. `local` and `bench` from topogov-local, when installed
        add(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; its exit code (see ``EXIT_CODES_HELP``)."""
    args = parser().parse_args(argv)
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (`topogov jobs | head`): the command's work is done; stop quietly,
        # with stdout on /dev/null so the interpreter's final flush cannot fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
