"""What every ``topogov`` command shares: exit codes, help texts, the usage error, reporting a
failure, the API options, and how numbers, levels and tables are shown. Standard library only at
load time (``topogov --help`` stays fast); the rest loads when a command runs."""

from __future__ import annotations

import argparse
import json
import os
import sys
import textwrap
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import quote

from topogov.domain.labels import HOSTNAME_LABEL, LAYER_LABEL_PREFIX
from topogov.domain.quantity import CPU, EFA, GPU, MEMORY
from topogov_cli.base import (  # noqa: F401 (re-exported: the commands import them from here)
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    LOCAL_DIR,
    CliError,
)

RESOURCES = (GPU, EFA, CPU, MEMORY)

EXIT_CODES_HELP = """exit codes:
  0  done
  1  refused: the API answered with an error (400 invalid, 403 not your team, 404, 409,
     422 never admissible / topology infeasible / priority not allowed, 429 in-flight cap)
  2  usage: bad flags or arguments, no endpoint found, Graphviz missing for --format svg
  3  unreachable or not authenticated: no connection, no or unknown credentials, a request
     API Gateway refuses (403: unsigned, bad signature, expired, unknown key), the API's 401,
     or the service failing (5xx, throttled)"""

ENDPOINT_HELP = """endpoint (first found): --endpoint, $TOPOGOV_ENDPOINT, endpoint = "URL" in
  ~/.config/topogov/config.toml (or the file $TOPOGOV_CONFIG names; optional region = "..."),
  "api" of ./.topogov/local/endpoints.json (written by `topogov local`).
credentials: the AWS chain (--profile or AWS_PROFILE, AWS_SHARED_CREDENTIALS_FILE, environment
  variables, SSO, roles); every request is SigV4-signed for execute-api."""


class Parser(argparse.ArgumentParser):
    """argparse with one-line usage errors: ``topogov submit: error: ... (see 'topogov submit --help')``."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


# -- parsers ------------------------------------------------------------------------------------------
def add_api_options(parser: argparse.ArgumentParser, output: bool = True) -> None:
    """``--endpoint``, ``--region``, ``--profile`` (and ``--output``) on a command that calls the API."""
    group = parser.add_argument_group("API and credentials")
    group.add_argument("--endpoint", metavar="URL", help="the API's base URL (see 'endpoint' below)")
    group.add_argument(
        "--region",
        metavar="REGION",
        help="SigV4 region (default: from an execute-api URL, the config file, AWS_REGION, the "
        "profile, else us-east-1)",
    )
    group.add_argument("--profile", metavar="PROFILE", help="AWS profile (default: $AWS_PROFILE)")
    if output:
        group.add_argument(
            "--output",
            choices=("text", "json"),
            default="text",
            help="text (default) or json: the API's raw JSON answer, for scripts",
        )


def command(sub: Any, name: str, summary: str, description: str, extra: str = "") -> argparse.ArgumentParser:
    epilog = "\n\n".join(part for part in (extra.strip("\n"), EXIT_CODES_HELP, ENDPOINT_HELP) if part)
    parser = sub.add_parser(
        name,
        help=summary,
        description="\n\n".join(textwrap.fill(p, 100) for p in description.split("\n\n")),
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.set_defaults(cli_prog=f"topogov {name}")
    return parser


# -- plumbing -----------------------------------------------------------------------------------------
def prog(args: argparse.Namespace) -> str:
    # not args.command: submit's --command shares that name with the subcommand's dest
    return getattr(args, "cli_prog", None) or "topogov"


def usage(message: str) -> Exception:
    return CliError(EXIT_USAGE, message)


def report(args: argparse.Namespace, exc: Any) -> None:
    """One line on stderr (``topogov CMD: ...``) and the API's details under it; with
    ``--output json`` the API's error body goes to stdout as well."""
    name = prog(args)
    if exc.exit_code == EXIT_USAGE and exc.body is None:
        print(f"{name}: error: {exc.message} (see '{name} --help')", file=sys.stderr)
        return
    if getattr(args, "output", "text") == "json" and exc.body is not None:
        print(json.dumps(exc.body, indent=2))
    print(_wrap(f"{name}: {exc.message}"), file=sys.stderr)
    for line in detail_lines(exc.details, exc.code):
        print("  " + line, file=sys.stderr)


def _wrap(text: str) -> str:
    import textwrap

    columns = terminal_width()
    if not columns:
        return text
    return textwrap.fill(text, columns, subsequent_indent="    ", break_on_hyphens=False)


def guarded(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        try:
            return fn(args)
        except CliError as exc:
            report(args, exc)
            return exc.exit_code

    run.__doc__ = fn.__doc__
    return run


def api_for(args: argparse.Namespace) -> Any:
    from topogov_cli.client import Api, resolve_endpoint

    return Api(resolve_endpoint(args.endpoint), profile=args.profile, region_flag=args.region)


def seg(text: str) -> str:
    return quote(text, safe="")


def print_json(doc: Any) -> None:
    print(json.dumps(doc, indent=2))


# -- formatting -----------------------------------------------------------------------------------------
def level_name(level: str | None) -> str:
    if not level:
        return "-"
    if level.startswith(LAYER_LABEL_PREFIX):
        return level[len(LAYER_LABEL_PREFIX) :]
    return {HOSTNAME_LABEL: "hostname"}.get(level, level)


def is_level(text: str) -> bool:
    return text.startswith(LAYER_LABEL_PREFIX) or text == HOSTNAME_LABEL


def topology_text(topo: Mapping[str, Any] | None) -> str:
    if not topo or topo.get("mode") in (None, "none"):
        return "none"
    text = f"{topo['mode']} {level_name(topo.get('level'))}"
    if topo.get("slice_level"):
        text += f", slices of {topo.get('slice_size')} at {level_name(topo['slice_level'])}"
    return text


def duration(seconds: int) -> str:
    h, rest = divmod(int(seconds), 3600)
    m, s = divmod(rest, 60)
    return "".join(f"{v}{u}" for v, u in ((h, "h"), (m, "m"), (s, "s")) if v) or "0s"


def amount(resource: str, value: Any) -> str:
    """A quantity as people read it: CPU in cores (the API counts millicores), memory in Gi/Ti
    (it counts bytes), devices as counts."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return str(value)
    if resource == CPU:
        return f"{value / 1000:g}"
    if resource == MEMORY:
        for unit, size in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20)):
            if abs(value) >= size:
                return f"{round(value / size, 1):g}{unit}"
        return f"{value}"
    return f"{value:g}" if isinstance(value, float) else str(value)


def table(headers: list[str], rows: Iterable[Iterable[Any]]) -> str:
    from topogov_cli.render import table as render_table

    return render_table(headers, [list(r) for r in rows])


def terminal_width() -> int | None:
    """Where to wrap long values and messages: ``$COLUMNS`` when set, else the terminal's width
    when stdout is a terminal (at least 60); None (no wrapping) for a pipe or a file, so scripts
    and ``grep`` see one line per message."""
    import shutil

    if os.environ.get("COLUMNS", "").isdigit():
        return max(60, int(os.environ["COLUMNS"]))
    if sys.stdout.isatty():
        return max(60, shutil.get_terminal_size((100, 24)).columns)
    return None


def fields(pairs: Iterable[tuple[str, Any]]) -> str:
    """``key  value`` lines, keys aligned; a long value wraps under itself (a value that already
    spans lines is kept as it is)."""
    import textwrap

    pairs = [(k, v) for k, v in pairs if v not in (None, "")]
    width = max((len(k) for k, _ in pairs), default=0)
    columns = terminal_width()
    room = (columns or 0) - width - 2
    lines = []
    for k, v in pairs:
        text = str(v)
        if columns and "\n" not in text and len(text) > room:
            text = ("\n" + " " * (width + 2)).join(
                textwrap.wrap(text, room, break_on_hyphens=False, break_long_words=False)
            )
        lines.append(f"{k.ljust(width)}  {text}")
    return "\n".join(lines)


# The request's fields as `topogov submit` spells them, so a refusal names the flag that was typed.
FIELD_FLAGS = {
    "job_name": "--job-name", "image": "--image", "command": "--command", "args": "--args",
    "environment": "--environment", "instance_type": "--instance-type", "node_count": "--node-count",
    "replica_count": "--replica-count", "tasks_per_node": "--tasks-per-node",
    "accelerators": "--accelerators", "vcpu": "--vcpu", "memory": "--memory", "efa": "--efa",
    "priority": "--priority", "max_retry": "--max-retry", "queue_name": "--queue-name",
    "namespace": "--namespace", "team": "--team", "preferred_topology": "--preferred-topology",
    "required_topology": "--required-topology", "topology.level": "--required-topology/--preferred-topology",
    "topology.fallbackAfter": "--fallback-after", "topology": "--topology",
    "topology.slice.level": "--slice-level", "topology.slice.size": "--slice-size",
    "expected_duration": "--expected-duration",
}  # fmt: skip


def detail_lines(details: Mapping[str, Any], code: str | None) -> list[str]:
    """The API's ``details`` as lines: tables for lists of records, ``key: value`` otherwise, and a
    hint of what to try for the refusals that say what would work."""
    lines: list[str] = []
    for key, value in details.items():
        if key == "problems" and isinstance(value, list) and len(value) <= 1:
            continue  # one problem: the headline already says it ("field: message")
        if key == "field" and code == "VALIDATION_ERROR":
            flag = FIELD_FLAGS.get(str(value))
            if flag:
                lines.append(f"flag: {flag}")
            continue  # the headline starts with the field
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            headers = list(dict.fromkeys(k for v in value for k in v))
            rows = [[amount(v.get("resource", ""), v.get(h, "")) for h in headers] for v in value]
            lines.extend(table([h.replace("_", " ").upper() for h in headers], rows).splitlines())
        elif isinstance(value, list):
            lines.append(f"{key.replace('_', ' ')}: {', '.join(str(v) for v in value) or '-'}")
        elif isinstance(value, dict) and all(isinstance(v, list) for v in value.values()):
            for sub, items in value.items():  # e.g. the levels of each flavor
                lines.append(f"{key.replace('_', ' ')} of {sub}: {', '.join(str(v) for v in items) or '-'}")
        elif isinstance(value, dict):
            lines.append(f"{key.replace('_', ' ')}: {json.dumps(value)}")
        else:
            shown = level_name(value) if isinstance(value, str) and is_level(value) else value
            lines.append(f"{key.replace('_', ' ')}: {shown}")
    if code == "TOPOLOGY_INFEASIBLE":
        would = details.get("tightest_level_that_holds")
        if isinstance(details.get("levels"), dict):
            lines.append("try: a level of that list, or another --instance-type")
        elif would:
            lines.append(f"try: --required-topology {level_name(would)}, or --topology auto")
        else:
            lines.append("try: fewer pods, --preferred-topology, or --topology none")
    elif code == "PRIORITY_NOT_ALLOWED" and details.get("allowed"):
        lines.append(f"try: --priority {details['allowed'][0]}, or leave it out ({details.get('default')})")
    return lines


def write_out(args: argparse.Namespace, text: str) -> None:
    if args.out:
        try:
            Path(args.out).write_text(text, encoding="utf-8")
        except OSError as exc:
            raise usage(f"cannot write {args.out}: {exc}") from None
        print(f"wrote {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
