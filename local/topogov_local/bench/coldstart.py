"""``topogov bench coldstart``: what a cold start of the functions costs, before and after the layer was
pruned and SnapStart turned on, each figure the median of fresh interpreters.

Each run is a fresh CPython of the Lambda runtime's version (3.12; ``--python``) started with
``-I -S -B``: its path is the function code, the layer's ``python/`` and a stand-in for the runtime's
own ``snapshot_restore_py``, nothing else, and nothing is compiled to disk (Lambda's ``/opt`` and
``/var/task`` are read-only: every cold start compiles what it imports). Both layers are built by
``python -m infra.layer`` (the bundling ``cdk synth`` runs), ``--full`` for the one before pruning.
The dry run is the API handler answering a signed ``POST /v1/jobs?dryRun=true`` event (the local API
Gateway's event) against a moto server holding the snapshot and the tables: offline.

- ``import``: the handler module, in a fresh interpreter;
- ``cold start``: importing the api handler, then its first dry run;
- with SnapStart, the cold start is the restore's hooks and the first dry run: the import and the
  priming (``before snapshot``) ran when the version was published. The restore of the snapshot
  itself (Lambda's, reported as ``Restore Duration``) cannot be measured here.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from topogov_cli.common import EXIT_OK
from topogov_local.cluster.pki import Pki, make_pki

ROOT = Path(__file__).resolve().parents[3]  # local/topogov_local/bench/ -> the repository
CODE = ROOT / "lambdas"  # the topogov package: what the function asset copies
POLICY = ROOT / "teams.yaml"
TEAM_A = "arn:aws:iam::123456789012:user/topogov-team-a"
BUCKET, LEDGER, COUNTERS, IDEMPOTENCY = "bench-snapshot", "bench-ledger", "bench-counters", "bench-idem"
RUNTIME_VERSION = "3.12"

# The child: argv = mode, code dir, layer dir, runtime stand-in dir; the event on stdin (JSON).
CHILD = r"""
import json, sys, time
mode, code, layer, runtime = sys.argv[1:5]
sys.path[:0] = [code, layer, runtime]
opened = set()
if mode == "trace":
    def audit(event, args):
        if event == "open" and isinstance(args[0], str) and args[0].startswith(layer):
            opened.add(args[0][len(layer) + 1:])
    sys.addaudithook(audit)
stdin = sys.stdin.read()
event = json.loads(stdin) if stdin else None
class Context:
    function_name = "topogov-api"; function_version = "1"; memory_limit_in_mb = 1024
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:topogov-api:live"
    aws_request_id = "00000000-0000-4000-8000-000000000000"
    log_group_name = "/aws/lambda/topogov-api"; log_stream_name = "bench"
    def get_remaining_time_in_millis(self): return 29000
out = {}
def now(): return time.perf_counter(), time.process_time()
def took(key, since):
    wall, cpu = now()
    out[key + "_s"], out[key + "_cpu_s"] = wall - since[0], cpu - since[1]
t0 = now()
if mode.startswith("import:"):
    __import__(mode.split(":", 1)[1])
    took("import", t0); print(json.dumps(out)); raise SystemExit(0)
from topogov.handlers.api import handler
took("import", t0)
before = set(sys.modules)
if mode == "snapstart":
    import snapshot_restore_py as hooks
    t1 = now()
    for fn, args, kwargs in reversed(hooks.get_before_snapshot()):
        fn(*args, **kwargs)
    took("prime", t1)
    before = set(sys.modules)
    t1 = now()
    for fn, args, kwargs in hooks.get_after_restore():
        fn(*args, **kwargs)
    took("restore_hooks", t1)
t1 = now()
answer = handler(event, Context())
took("first_request", t1)
out["status"] = answer["statusCode"]
out["first_request_imports"] = sorted(set(sys.modules) - before)
if mode == "trace":
    import ast, importlib, pathlib, threading
    from http.server import BaseHTTPRequestHandler, HTTPServer
    import topogov.handlers.reconcile
    names = set()
    for p in pathlib.Path(code, "topogov").rglob("*.py"):
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.Import):
                names.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module)
    for name in sorted(names):
        importlib.import_module(name)  # every module the service names anywhere, lazy imports too
    class Kube(BaseHTTPRequestHandler):
        def do_GET(self):
            body = json.dumps({"kind": "NodeList", "metadata": {}, "items": []}).encode()
            self.send_response(200); self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
        def log_message(self, *a): pass
    server = HTTPServer(("127.0.0.1", 0), Kube)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    from topogov.adapters.kube import KubeHttp
    from topogov.adapters.kube_auth import ClusterEndpoint, EksTokenSource, eks_api_client
    from topogov.bootstrap import aws_session, retrying
    session = aws_session("us-east-1")
    tokens = EksTokenSource(session.client("sts"), "bench")
    kube = KubeHttp(eks_api_client(ClusterEndpoint(f"http://127.0.0.1:{server.server_port}", b""), tokens))
    out["kube_status"] = kube.request("GET", "/api/v1/nodes").status
    ec2 = retrying(session, "ec2")
    out["ec2_topology"] = len(ec2.describe_instance_topology().get("Instances", []))
    try:
        retrying(session, "eks").describe_cluster(name="absent")
    except Exception as exc:
        out["eks_error"] = type(exc).__name__
    server.shutdown()
    out["opened"] = sorted(opened)
print(json.dumps(out))
"""


def runtime_python(explicit: str | None = None) -> tuple[str, str]:
    """A CPython of the Lambda runtime's version, and its ``major.minor``; else this interpreter."""
    candidates = [explicit] if explicit else []
    candidates += [shutil.which(f"python{RUNTIME_VERSION}") or ""]
    candidates += sorted(glob.glob(os.path.expanduser(f"~/.pyenv/versions/{RUNTIME_VERSION}*/bin/python3")))
    candidates += [sys.executable]
    for exe in filter(None, candidates):
        try:
            version = subprocess.run(
                [exe, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                capture_output=True, text=True, check=True, timeout=30,
            ).stdout.strip()  # fmt: skip
        except (OSError, subprocess.SubprocessError):
            continue
        if explicit or version == RUNTIME_VERSION or exe == sys.executable:
            return exe, version
    raise RuntimeError("no Python interpreter found")


def build_layer(dest: Path, *, full: bool, python_version: str) -> Path:
    """The layer's ``python/`` folder, as ``cdk synth`` bundles it (``full``: before pruning)."""
    argv = [sys.executable, "-m", "infra.layer", str(dest), "--python-version", python_version]
    subprocess.run([*argv, *(["--full"] if full else [])], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return dest / "python"


def runtime_standin(dest: Path) -> Path:
    """What Lambda's Python runtime provides beside the layer: ``snapshot_restore_py`` (SnapStart's
    hook registry), copied from this environment."""
    import snapshot_restore_py  # type: ignore[import-untyped]  # no py.typed

    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy2(snapshot_restore_py.__file__, dest / "snapshot_restore_py.py")
    return dest


def stage_code(dest: Path) -> Path:
    """The function code as its asset holds it: the topogov package's sources, no compiled file."""
    for src in (CODE / "topogov").rglob("*.py"):
        if "__pycache__" not in src.parts:
            target = dest / src.relative_to(CODE)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target)
    return dest


def size_mb(site: Path) -> float:
    return sum(p.stat().st_size for p in site.parent.rglob("*") if p.is_file()) / 1e6


@contextlib.contextmanager
def aws(workdir: Path, nodes: int = 64) -> Iterator[dict[str, str]]:
    """A moto server with the snapshot bucket (a snapshot of ``nodes`` p5 nodes) and the tables, and
    the EKS cluster ``bench`` whose endpoint answers API discovery (a high-level dry run asks which
    training kinds the cluster serves: here none); the api function's environment against them."""
    import boto3

    from topogov.adapters.snapshot_store import S3SnapshotStore
    from topogov.adapters.tables import create_tables
    from topogov.settings import ApiSettings
    from topogov_local.bench.reconcile import synthetic_snapshot
    from topogov_local.processes import ManagedProcess, free_port, python_module

    port = free_port()
    moto = ManagedProcess(
        "aws",
        python_module("topogov_local.aws.server", "--host", "127.0.0.1", "--port", str(port)),
        env={"MOTO_EC2_LOAD_DEFAULT_AMIS": "false"},
        log_path=workdir / "aws.log",
    )
    url = moto.start()
    discovery = DiscoveryServer(make_pki(workdir / "pki"))
    try:
        register_cluster(url, "bench", discovery.url, discovery.ca)
        creds = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
        session = boto3.session.Session(
            aws_access_key_id="testing", aws_secret_access_key="testing", region_name="us-east-1"
        )
        session.client("s3", endpoint_url=url).create_bucket(Bucket=BUCKET)
        create_tables(session.client("dynamodb", endpoint_url=url), LEDGER, COUNTERS, IDEMPOTENCY)
        S3SnapshotStore(session.client("s3", endpoint_url=url), BUCKET).save(synthetic_snapshot(nodes))
        settings = ApiSettings(
            cluster_name="bench",
            policy_file=str(POLICY),
            snapshot_bucket=BUCKET,
            ledger_table=LEDGER,
            counters_table=COUNTERS,
            idempotency_table=IDEMPOTENCY,
        )
        yield {
            **creds,
            **settings.to_env(),
            "AWS_ENDPOINT_URL": url,
            "AWS_REGION": "us-east-1",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_LAMBDA_FUNCTION_NAME": "topogov-api",
            "POWERTOOLS_SERVICE_NAME": "topogov",
            "POWERTOOLS_METRICS_NAMESPACE": "Topogov",
            "POWERTOOLS_LOG_LEVEL": "WARNING",
            "LAMBDA_TASK_ROOT": str(CODE),
            "_X_AMZN_TRACE_ID": "Root=1-00000000-000000000000000000000000;Sampled=0",
        }
    finally:
        discovery.close()
        moto.stop()


class DiscoveryServer:
    """The cluster's API endpoint as the bench's dry run meets it: TLS with the local CA, every group
    version of the training kinds not found (a cluster with neither JobSet nor Kubeflow installed)."""

    def __init__(self, pki: Pki) -> None:
        import ssl
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        class NotFound(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = b'{"kind":"Status","status":"Failure","reason":"NotFound","code":404}'
                self.send_response(404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), NotFound)
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(pki.path("proxy.crt"), pki.path("proxy.key"))
        self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        self.url = f"https://127.0.0.1:{self.server.server_port}"
        self.ca = pki.ca.read_bytes()
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def register_cluster(aws_url: str, name: str, endpoint: str, ca_pem: bytes) -> None:
    """The EKS cluster ``name`` in the moto server, its endpoint and CA given (the local AWS server's
    control route, as the rehearsal registers its cluster)."""
    import base64
    import urllib.request

    body = {"name": name, "endpoint": endpoint, "certificateAuthority": base64.b64encode(ca_pem).decode()}
    req = urllib.request.Request(
        aws_url + "/_topogov/eks/clusters", data=json.dumps(body).encode(), method="POST"
    )
    req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=30) as resp:
        resp.read()


def dry_run_event() -> dict[str, Any]:
    """A signed ``POST /v1/jobs?dryRun=true`` of team-a, as the local API Gateway hands it over."""
    from topogov.handlers.api import routes
    from topogov_local.apigw import LocalApiGateway
    from topogov_local.apigw.auth import Caller

    caller = Caller(access_key_id="AKIDBENCHTEAMA", secret_access_key="x", arn=TEAM_A)
    gateway = LocalApiGateway(lambda e, c: {}, {caller.access_key_id: caller}, stage="prod", routes=routes())
    body = {
        "job_name": "cold",
        "image": "x",
        "accelerators": 8,
        "replica_count": 4,
        "required_topology": "layer-3",
    }
    return dict(gateway.json_post_event(caller, "/v1/jobs", body, {"dryRun": "true"}))


def child(
    python: str,
    mode: str,
    code: Path,
    site: Path,
    runtime: Path,
    env: dict[str, str],
    event: dict[str, Any] | None,
) -> dict[str, Any]:
    """One fresh interpreter (see the module's docstring); its JSON answer."""
    proc = subprocess.run(
        [python, "-I", "-S", "-B", "-c", CHILD, mode, str(code), str(site), str(runtime)],
        input=json.dumps(event) if event is not None else "",
        capture_output=True, text=True, env={"PATH": os.environ.get("PATH", ""), **env}, timeout=300,
    )  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(f"{mode}: exit {proc.returncode}\n{proc.stderr[-3000:]}")
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def measure(python: str, version: str, runs: int, workdir: Path) -> dict[str, Any]:
    full = build_layer(workdir / "full", full=True, python_version=version)
    pruned = build_layer(workdir / "pruned", full=False, python_version=version)
    runtime = runtime_standin(workdir / "runtime")
    code = stage_code(workdir / "code")
    event = dry_run_event()
    out: dict[str, Any] = {"python": version, "runs": runs}
    sites = {"full": full, "pruned": pruned}
    samples: dict[str, dict[str, list[dict[str, Any]]]] = {n: {} for n in sites}
    with aws(workdir) as env:
        for _ in range(runs):  # interleaved, so a busy moment of the machine weighs on both layers
            for name, site in sites.items():
                for mode, event_ in (
                    ("import:topogov.handlers.api", None),
                    ("import:topogov.handlers.reconcile", None),
                    ("cold", event),
                    ("snapstart", event),
                ):
                    got = child(python, mode, code, site, runtime, env, event_)
                    if event_ is not None and got["status"] != 200:
                        raise RuntimeError(f"{name} {mode}: the dry run answered {got['status']}")
                    samples[name].setdefault(mode, []).append(got)
    for name, site in sites.items():
        by = samples[name]

        def med(mode: str, *keys: str, by: dict[str, list[dict[str, Any]]] = by) -> list[float]:
            return [
                statistics.median(sum(r[k + s] for k in keys) for r in by[mode]) for s in ("_s", "_cpu_s")
            ]

        out[name] = {
            "layer_mb": size_mb(site),
            "import_api": med("import:topogov.handlers.api", "import"),
            "import_reconcile": med("import:topogov.handlers.reconcile", "import"),
            "cold": med("cold", "import", "first_request"),
            "prime": med("snapstart", "import", "prime"),
            "snapstart": med("snapstart", "restore_hooks", "first_request"),
            "first_request_imports": len(by["cold"][0]["first_request_imports"]),
            "after_prime_imports": by["snapstart"][0]["first_request_imports"],
        }
    return out


def render(result: dict[str, Any]) -> str:
    from topogov_cli.render import table

    full, pruned = result["full"], result["pruned"]

    def t(pair: list[float]) -> str:
        return f"{pair[0]:.3f} ({pair[1]:.3f})"

    rows = [
        ["layer, unzipped (MB)", f"{full['layer_mb']:.1f}", f"{pruned['layer_mb']:.1f}", "-"],
        ["import topogov.handlers.api", t(full["import_api"]), t(pruned["import_api"]), "-"],
        [
            "import topogov.handlers.reconcile",
            t(full["import_reconcile"]),
            t(pruned["import_reconcile"]),
            "-",
        ],
        [
            "api cold start: import + first dry run",
            t(full["cold"]),
            t(pruned["cold"]),
            t(pruned["snapstart"]),
        ],
        ["  at publish: import + before-snapshot hook", "-", "-", t(pruned["prime"])],
    ]
    head = ["seconds: wall (cpu)", "before: full layer", "pruned layer", "pruned + SnapStart"]
    lines = [
        f"Cold start, median of {result['runs']} fresh CPython {result['python']} interpreters "
        "(path: code + layer only, nothing compiled to disk):",
        table(head, rows),
        "SnapStart: the cold start is the after-restore hook + the first dry run; Lambda's restore of "
        "the snapshot itself (Restore Duration) comes on top and cannot be measured here.",
        f"modules the first dry run imports: {full['first_request_imports']} without priming, "
        f"{len(pruned['after_prime_imports'])} after it",
    ]
    if result["python"] != RUNTIME_VERSION:
        lines.append(f"note: no Python {RUNTIME_VERSION} found; the layers were built for {result['python']}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    python, version = runtime_python(args.python)
    with tempfile.TemporaryDirectory(prefix="topogov-bench-coldstart-") as tmp:
        result = measure(python, version, args.runs, Path(tmp))
    if args.json:
        print(json.dumps(result))
    else:
        print(render(result))
    return EXIT_OK
