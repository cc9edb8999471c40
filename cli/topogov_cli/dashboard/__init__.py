"""``topogov dashboard``: the fleet, the queues and every job's place in a browser, served from this
machine (docs/dashboard.md). A local web server bound to 127.0.0.1 (a free port unless ``--port``)
serves the page and forwards its calls to the Topogov API signed with your own credentials, found as
every ``topogov`` command finds them; nothing is deployed. ``server.py`` is the server and what it
forwards; the page's source is ``cli/dashboard-web/`` in the repository, built into ``static/``."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from topogov_cli.common import EXIT_OK, add_api_options, api_for, command, guarded

DEFAULT_REFRESH_S = 10.0


def add_parser(sub: Any) -> None:
    """Add ``dashboard`` to the top-level ``subparsers``."""
    p = command(
        sub,
        "dashboard",
        "the fleet, the queues and each job's place, in your browser (a local web server)",
        "Start a local web server on 127.0.0.1 that serves the Topogov dashboard (fleet heat map, "
        "teams, queue, jobs, what-if) and forwards the page's calls to the Topogov API, signed with "
        "your credentials: the page shows what the API shows you. Prints the URL (with a login token, "
        "good once: it opens one browser, which gets a session cookie) and serves until Ctrl-C; "
        "--open opens your browser on a login link of its own, through a file only you can read.\n\n"
        "The server forwards only the API's read routes the page uses and POST /v1/whatif, and "
        "refuses any request whose Host or Origin is not its own (DNS rebinding, other pages).",
    )
    p.add_argument(
        "--port", type=int, default=0, metavar="PORT", help="port on 127.0.0.1 (default: a free one)"
    )
    p.add_argument("--open", action="store_true", help="open the page in your web browser")
    p.add_argument(
        "--refresh",
        type=float,
        default=DEFAULT_REFRESH_S,
        metavar="SECONDS",
        help=f"how often a visible page refreshes (default {DEFAULT_REFRESH_S:g}; at least 2)",
    )
    add_api_options(p, output=False)
    p.set_defaults(func=guarded(run))


def start(args: argparse.Namespace) -> Any:
    """The server for ``args``, serving in a thread: endpoint and credentials resolved first, so a
    missing one fails here, in the terminal, and not in the browser."""
    from topogov_cli.common import usage

    if not 0 <= args.port <= 65535:
        raise usage(f"--port {args.port}: a port is 0 to 65535")
    if args.refresh < 2:
        raise usage(f"--refresh {args.refresh:g}: at least 2 seconds (the API is not to be hammered)")
    try:
        return serve(api_for(args), args.port, refresh_s=args.refresh)
    except OSError as exc:
        raise usage(f"--port {args.port}: cannot listen on 127.0.0.1:{args.port} ({exc.strerror})") from None


def serve(api: Any, port: int = 0, *, refresh_s: float = DEFAULT_REFRESH_S) -> Any:
    """A ``DashboardServer`` for ``api`` (a ``topogov_cli.client.Api``) on 127.0.0.1:``port``,
    serving in a thread (``topogov local`` starts one beside its stack). Raises ``CliError`` when
    the credentials cannot be found, ``OSError`` when the port is taken."""
    from topogov_cli.dashboard.server import DashboardServer, api_upstream

    api.credentials()
    api.region()
    server = DashboardServer(api_upstream(api, api.signing_profile), port, refresh_s=refresh_s)
    server.start()
    return server


def run(args: argparse.Namespace) -> int:
    server = start(args)
    who = server.upstream.describe.get("signed_as") or "the default AWS credentials"
    print(f"topogov dashboard: {server.url}", flush=True)
    print(f"  the API {server.upstream.describe['endpoint']}, signed as {who}; Ctrl-C stops", flush=True)
    launcher = open_browser(server) if args.open else None
    try:
        import threading

        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
        if launcher is not None:
            launcher.unlink(missing_ok=True)
    return EXIT_OK


def open_browser(server: Any) -> Any:
    """Open the dashboard in the web browser without its login link in the browser's command line
    (any user of the machine can read a process's arguments): the browser is given a file only you
    can read (mode 0600, in a directory of yours) that sends it on to a login link of its own, as
    Jupyter opens its notebooks. The file is returned, to be removed when the server stops."""
    import html
    import os
    import tempfile
    import webbrowser
    from pathlib import Path

    folder = Path(tempfile.mkdtemp(prefix="topogov-dashboard-"))
    launcher = folder / "open.html"
    link = html.escape(server.login_url(), quote=True)
    fd = os.open(launcher, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(
            f'<!doctype html><meta http-equiv="refresh" content="0;url={link}"><a href="{link}">open</a>'
        )
    if not webbrowser.open(launcher.as_uri()):
        print("  (no web browser found to open: open the URL above yourself)", file=sys.stderr)
    return launcher
