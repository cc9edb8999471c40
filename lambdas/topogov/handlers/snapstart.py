"""SnapStart runtime hooks of the api function (infra/api.py turns SnapStart on for it).

Lambda initialises a SnapStart function once per published version, runs the hooks registered
before the snapshot, and starts every later cold start by restoring that snapshot and running the
after-restore hooks (Lambda Developer Guide, snapstart-runtime-hooks-python.html). The registry is
``snapshot_restore_py``, which Lambda's Python runtime ships (it is never in the layer: a copy there
would shadow the runtime's); ``topogov.handlers.api`` calls :func:`register` with its resolver and
its service setter, as the runtime only runs hooks registered by modules the handler imports (and so
this module never imports the handler's).

:func:`prime` (before the snapshot) builds the service the first request uses - the policy loaded
and validated, the S3 and DynamoDB clients with their service models - imports what the api
function's code imports on first use (the Kubernetes client, the idempotency utility, the admission
logic...: :func:`first_use_imports` finds each in the code), creates the Tracer (the X-Ray SDK), and
has the resolver build its per-route validation. It makes no
network call and fetches no credential: the clients sign with credentials resolved on their first
request, after the restore (:func:`deferred_session`), so none is in the snapshot, and no connection
is open to be copied (the X-Ray emitter's UDP socket is connectionless).

:func:`refresh` (after each restore) re-seeds ``random``: every environment restored from one snapshot
would otherwise draw the same retry jitter (Lambda Developer Guide, snapstart-uniqueness.html).
"""

from __future__ import annotations

import ast
import datetime as dt
import json
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from aws_lambda_powertools.event_handler import APIGatewayRestResolver

    from topogov.logic.api_service import ApiService

ENTRY = "topogov.handlers.api"  # where the walk of the api function's imports starts
OPTIONAL = frozenset({"snapshot_restore_py"})  # Lambda's runtime has it; elsewhere there is no snapshot
CREDENTIALS_LIFETIME = dt.timedelta(minutes=20)  # see DeferredChain._fetch


class DeferredChain:
    """The default credential chain, asked only when a client first signs a request, and again
    whenever botocore's refresh window says so (every few minutes)."""

    METHOD = "topogov-deferred"

    def __init__(self, chain: Any) -> None:
        self._chain = chain  # botocore's CredentialResolver: env, container (SnapStart), metadata...
        self._inner: Any = None
        self.fetches = 0

    def load(self) -> Any:
        from botocore.credentials import DeferredRefreshableCredentials

        return DeferredRefreshableCredentials(refresh_using=self._fetch, method=self.METHOD)

    def _fetch(self) -> dict[str, Any]:
        from botocore.exceptions import NoCredentialsError

        self.fetches += 1
        if self._inner is None or not hasattr(self._inner, "refresh_needed"):
            self._inner = self._chain.load_credentials()  # static ones are re-read each time
        if self._inner is None:
            raise NoCredentialsError()
        frozen = self._inner.get_frozen_credentials()  # a refreshable inner one refreshes itself
        # 20 minutes: botocore refreshes 15 minutes before the expiry it is told, so this copy is
        # re-read from the inner one after ~5; the inner one is refreshed 15 minutes before its own.
        expiry = dt.datetime.now(dt.UTC) + CREDENTIALS_LIFETIME
        return {
            "access_key": frozen.access_key,
            "secret_key": frozen.secret_key,
            "token": frozen.token,
            "expiry_time": expiry.isoformat(),
        }


def deferred_session(region: str | None) -> Any:
    """A boto3 session whose clients hold no credential until their first signed request."""
    import boto3
    import botocore.session
    from botocore.credentials import CredentialResolver, create_credential_resolver

    core = botocore.session.Session()
    chain = DeferredChain(create_credential_resolver(core, region_name=region))
    core.register_component("credential_provider", CredentialResolver(providers=[chain]))
    return boto3.session.Session(botocore_session=core, region_name=region)


def _resolver_event() -> dict[str, Any]:
    """``GET /v1/openapi.json`` as API Gateway sends it: answered from the code alone, and building
    the document builds every route's request validation, which a first request would otherwise do."""
    return {
        "resource": "/v1/openapi.json",
        "path": "/v1/openapi.json",
        "httpMethod": "GET",
        "headers": {"Host": "snapstart.invalid"},
        "multiValueHeaders": {"Host": ["snapstart.invalid"]},
        "queryStringParameters": None,
        "multiValueQueryStringParameters": None,
        "pathParameters": None,
        "stageVariables": None,
        "requestContext": {
            "resourcePath": "/v1/openapi.json",
            "httpMethod": "GET",
            "path": "/prod/v1/openapi.json",
            "stage": "prod",
            "requestId": "snapstart-prime",
            "identity": {"sourceIp": "127.0.0.1", "userArn": None},
        },
        "body": None,
        "isBase64Encoded": False,
    }


def prime(app: APIGatewayRestResolver, set_service: Callable[[ApiService], None]) -> None:
    """Before the snapshot: everything the first request would do that needs no network."""
    from topogov.bootstrap import build_api_service
    from topogov.observability import get_tracer
    from topogov.settings import ApiSettings

    settings = ApiSettings.from_env()
    set_service(build_api_service(settings, deferred_session(settings.region)))
    for module, names in first_use_imports():
        __import__(module, fromlist=names)  # as the import statement in the function will
    get_tracer()  # the X-Ray SDK (imported and its patches applied on the Tracer's creation)
    context: Any = None  # the resolver keeps it for the handler's use; the openapi route reads none
    answer = app.resolve(_resolver_event(), context)
    if answer["statusCode"] != 200:  # the hook failing fails the publish, not a request later
        raise RuntimeError(f"SnapStart priming: GET /v1/openapi.json answered {answer['statusCode']}")
    json.loads(answer["body"])


def first_use_imports(entry: str = ENTRY, root: Path | None = None) -> list[tuple[str, tuple[str, ...]]]:
    """What the api function imports inside functions (on first use), found in the code itself: every
    ``topogov`` module the handler reaches by any import, top-level or in a function, and each import
    statement inside a function of those modules (but those under ``if TYPE_CHECKING``). Read from the
    package's source with :mod:`ast`, nothing imported to find them; sorted, each module once with the
    names its statements take from it."""
    root = root or Path(__file__).resolve().parents[2]  # .../topogov/handlers/snapstart.py -> the root
    lazy: dict[str, set[str]] = {}
    seen: set[str] = set()
    todo = [entry]
    while todo:
        name = todo.pop()
        path = _source(root, name)
        if name in seen or path is None:
            continue
        seen.add(name)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for module, names, in_function in _imports(ast.parse(path.read_text()), package):
            if in_function and module not in OPTIONAL:
                lazy.setdefault(module, set()).update(names)
            if module.split(".")[0] == "topogov":
                todo.append(module)
                todo.extend(f"{module}.{n}" for n in names if _source(root, f"{module}.{n}"))
    topogov = [(m, ()) for m in sorted(seen - set(lazy))]
    return topogov + [(m, tuple(sorted(lazy[m]))) for m in sorted(lazy)]


def _source(root: Path, module: str) -> Path | None:
    base = root.joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _imports(tree: ast.AST, package: str) -> Iterator[tuple[str, tuple[str, ...], bool]]:
    """Each import statement of ``tree``: (the module, the names taken from it, in a function or not);
    relative imports resolved against ``package``."""
    stack: list[tuple[ast.AST, bool]] = [(tree, False)]
    while stack:
        node, in_function = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                stack.extend((c, in_function) for c in child.orelse)
                continue
            inner = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            if isinstance(child, ast.Import):
                yield from ((a.name, (), inner) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                module = child.module or ""
                if child.level:
                    parts = package.split(".")[: len(package.split(".")) - child.level + 1]
                    module = ".".join([*parts, module] if module else parts)
                yield module, tuple(a.name for a in child.names), inner
            stack.append((child, inner))


def refresh() -> None:
    """After each restore: what must differ between environments restored from one snapshot."""
    random.seed()  # from os.urandom, which the restored kernel re-seeds


def register(app: APIGatewayRestResolver, set_service: Callable[[ApiService], None]) -> None:
    """Register the hooks with Lambda's runtime; outside it (no ``snapshot_restore_py``: not Lambda's
    Python runtime, which ships it from 3.12, nor a dev install) there is no snapshot to prepare."""
    try:
        from snapshot_restore_py import (  # type: ignore[import-untyped]  # no py.typed
            register_after_restore,
            register_before_snapshot,
        )
    except ImportError:
        return
    register_before_snapshot(prime, app, set_service)
    register_after_restore(refresh)
