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


def versions() -> str:
    """``topogov-cli 0.x`` and the other Topogov distributions installed beside it."""
    from importlib.metadata import PackageNotFoundError, version

    found = []
    for dist in ("topogov-cli", "topogov", "topogov-local"):
        try:
            found.append(f"{dist} {version(dist)}")
        except PackageNotFoundError:
            continue
    return ", ".join(found) or "topogov-cli (not installed as a distribution)"


def parser() -> argparse.ArgumentParser:
    from topogov_cli import (
        completion,
        dashboard,
        doctor,
        governor,
        jobs,
        policy,
        preflight,
        reconcile,
        submit,
        teams,
        topology,
        whatif,
    )

    p = Parser(
        prog="topogov",
        description="Topology-aware task governance for GPU clusters on Amazon EKS.",
        epilog=f"{EXIT_CODES_HELP}\n\n{ENDPOINT_HELP}\n\n'topogov COMMAND --help' for a command's flags.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=versions(), help="the installed versions")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for group in (
        submit,
        jobs,
        teams,
        topology,
        reconcile,
        policy,
        governor,
        doctor,
        preflight,
        whatif,
        dashboard,
        completion,
    ):
        group.add_parser(sub)
    for add in plugin_commands():  # e.g. `local` and `bench` from topogov-local, when installed
        add(sub)
    p.set_defaults(cli_parser=p)  # `topogov completion` describes the whole parser
    return p


def unknown_arguments(p: argparse.ArgumentParser, argv: Sequence[str], extra: list[str]) -> str:
    """``topogov submit: error: unrecognized argument --jobname: did you mean --job-name? (see
    'topogov submit --help')``: named by the command that was given, with the closest flag."""
    import difflib

    sub = next((a for a in p._actions if isinstance(a, argparse._SubParsersAction)), None)
    choices = sub.choices if sub is not None else {}
    # the command given: the first word that names one (args.command may be `submit --command`)
    command = next((w for w in argv if w in choices), None)
    target = choices[command] if command else p
    flags = [o for a in target._actions for o in a.option_strings if o.startswith("--")]
    first = next((x for x in extra if x.startswith("-")), extra[0])
    close = difflib.get_close_matches(first.split("=", 1)[0], flags, n=1, cutoff=0.6)
    hint = f": did you mean {close[0]}?" if close else ""
    rest = [x for x in extra if x is not first and x.startswith("-")]
    more = f" (and {' '.join(rest)})" if rest else ""
    return f"{target.prog}: error: unrecognized argument {first}{hint}{more} (see '{target.prog} --help')"


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; its exit code (see ``EXIT_CODES_HELP``)."""
    p = parser()
    args, extra = p.parse_known_args(argv)
    if extra:
        print(unknown_arguments(p, sys.argv[1:] if argv is None else argv, extra), file=sys.stderr)
        return 2
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
