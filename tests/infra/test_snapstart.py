"""SnapStart for the api function: the template (published versions, the ``live`` alias, API Gateway
invoking the alias) and the hooks (topogov/handlers/snapstart.py), run as Lambda's runtime runs them -
the before-snapshot hooks in reverse order of registration, then, in each restored environment, the
after-restore hooks - in fresh interpreters."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import aws_cdk as cdk
import pytest

import app as appmod
from infra.names import PIP_PLATFORM
from topogov_local.bench import coldstart as bench

ROOT = Path(__file__).resolve().parents[2]
CONTEXT = {
    "topogov:clusterName": "gpu-training",
    "topogov:account": "111122223333",
    "topogov:region": "us-west-2",
    "aws:cdk:bundling-stacks": [],
}
API_HANDLER = "topogov.handlers.api.handler"


@pytest.fixture(scope="module")
def resources():
    app = cdk.App(context=CONTEXT)
    stack = appmod.build(app)
    return app.synth().get_stack_by_name(stack.stack_name).template["Resources"]


def of_type(resources, kind):
    return {k: v for k, v in resources.items() if v["Type"] == kind}


def test_the_api_function_snapshots_published_versions_and_the_api_invokes_its_alias(resources):
    fns = of_type(resources, "AWS::Lambda::Function")
    ((api_id, api),) = [(k, v) for k, v in fns.items() if v["Properties"]["Handler"] == API_HANDLER]
    props = api["Properties"]
    assert props["SnapStart"] == {"ApplyOn": "PublishedVersions"}
    major, minor = props["Runtime"].removeprefix("python").split(".")
    assert (int(major), int(minor)) >= (3, 12)  # SnapStart's Python runtimes
    versions = of_type(resources, "AWS::Lambda::Version")
    ((version_id, version),) = versions.items()
    assert version["Properties"]["FunctionName"] == {"Ref": api_id}
    # the previous version (and its snapshot, charged for as long as it exists) goes with the update
    assert version["DeletionPolicy"] == "Delete" and version["UpdateReplacePolicy"] == "Delete"
    ((alias_id, alias),) = of_type(resources, "AWS::Lambda::Alias").items()
    assert alias["Properties"] == {
        "FunctionName": {"Ref": api_id},
        "FunctionVersion": {"Fn::GetAtt": [version_id, "Version"]},
        "Name": "live",
    }
    methods = of_type(resources, "AWS::ApiGateway::Method")
    assert methods
    for method in methods.values():
        integration = method["Properties"]["Integration"]
        assert integration["Type"] == "AWS_PROXY"
        uri = json.dumps(integration["Uri"])
        assert json.dumps({"Ref": alias_id}) in uri and api_id not in uri, uri
    grants = [
        p["Properties"]
        for p in of_type(resources, "AWS::Lambda::Permission").values()
        if p["Properties"]["Principal"] == "apigateway.amazonaws.com"
    ]
    assert len(grants) == len(methods)
    assert all(g["FunctionName"] == {"Ref": alias_id} for g in grants)


def test_the_reconcile_function_has_no_snapstart_and_its_rules_invoke_it_directly(resources):
    """One pass at a time on a schedule: its cold start is a fraction of a second of a pass that may
    run minutes, while a snapshot would be charged for as long as the version exists."""
    fns = of_type(resources, "AWS::Lambda::Function")
    ((rec_id, rec),) = [(k, v) for k, v in fns.items() if v["Properties"]["Handler"] != API_HANDLER]
    assert "SnapStart" not in rec["Properties"]
    for rule in of_type(resources, "AWS::Events::Rule").values():
        assert [t["Arn"] for t in rule["Properties"]["Targets"]] == [{"Fn::GetAtt": [rec_id, "Arn"]}]


def test_the_layer_is_built_for_the_functions_architecture(resources):
    (layer,) = of_type(resources, "AWS::Lambda::LayerVersion").values()
    fns = of_type(resources, "AWS::Lambda::Function").values()
    archs = {a for f in fns for a in f["Properties"]["Architectures"]}
    assert archs == set(layer["Properties"]["CompatibleArchitectures"]) == {"x86_64"}
    wheels = {"x86_64": "manylinux2014_x86_64", "arm64": "manylinux2014_aarch64"}
    assert wheels[archs.pop()] == PIP_PLATFORM


def test_the_handler_module_registers_the_hooks():
    """Lambda runs only hooks registered by modules the handler imports."""
    import snapshot_restore_py as hooks

    from topogov.handlers import api, snapstart

    assert api.handler is not None
    assert (snapstart.prime, (api.app, api.set_service), {}) in hooks.get_before_snapshot()
    assert (snapstart.refresh, (), {}) in hooks.get_after_restore()


PHASES = r"""
import json, sys
phase = ["import"]
connects = []
def audit(event, args):
    if event == "socket.connect":
        connects.append([phase[0], str(args[1])])
sys.addaudithook(audit)
import urllib.request
import snapshot_restore_py as hooks
from topogov.handlers.api import handler
phase[0] = "before snapshot"
for fn, a, k in reversed(hooks.get_before_snapshot()):
    fn(*a, **k)
phase[0] = "snapshot"
urllib.request.urlopen(sys.argv[1] + "/_snapshot").read()
phase[0] = "after restore"
for fn, a, k in hooks.get_after_restore():
    fn(*a, **k)
class Context:
    function_name = "topogov-api"; function_version = "1"; memory_limit_in_mb = 1024
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:topogov-api:live"
    aws_request_id = "00000000-0000-4000-8000-000000000001"
    def get_remaining_time_in_millis(self): return 29000
phase[0] = "request"
answer = handler(json.loads(sys.stdin.read()), Context())
print(json.dumps({"status": answer["statusCode"], "connects": connects}))
"""


class Credentials(BaseHTTPRequestHandler):
    """The container credentials endpoint a SnapStart function gets credentials from
    (``AWS_CONTAINER_CREDENTIALS_FULL_URI``), logging each request's path."""

    log: ClassVar[list[str]] = []

    def do_GET(self):
        type(self).log.append(self.path)
        body = json.dumps(
            {
                "AccessKeyId": "ASIARESTOREDSNAPSHOT",
                "SecretAccessKey": "testing",
                "Token": "testing",
                "Expiration": "2099-01-01T00:00:00Z",
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_no_credential_nor_connection_before_the_snapshot_the_first_request_after_it_gets_both(tmp_path):
    server = ThreadingHTTPServer(("127.0.0.1", 0), Credentials)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    stub = f"http://127.0.0.1:{server.server_port}"
    Credentials.log = []
    try:
        with bench.aws(tmp_path) as env:
            env = {k: v for k, v in env.items() if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
            env["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = f"{stub}/credentials"
            proc = subprocess.run(
                [sys.executable, "-c", PHASES, stub],
                input=json.dumps(bench.dry_run_event()),
                env={"PATH": os.environ["PATH"], "HOME": str(tmp_path), **env},
                capture_output=True, text=True, timeout=300, check=False,
            )  # fmt: skip
            aws_port = env["AWS_ENDPOINT_URL"].rsplit(":", 1)[1]
    finally:
        server.shutdown()
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["status"] == 200
    # the credentials: fetched once, by the first request after the restore, never before the snapshot
    assert Credentials.log == ["/_snapshot", "/credentials"]
    phases = {phase for phase, _ in out["connects"]}
    assert phases <= {"snapshot", "request"}, out["connects"]  # no connection is in the snapshot
    request = [addr for phase, addr in out["connects"] if phase == "request"]
    assert any(aws_port in a for a in request) and any(str(server.server_port) in a for a in request)


RESTORES = r"""
import random, sys
import snapshot_restore_py as hooks
import topogov.handlers.api
for fn, a, k in reversed(hooks.get_before_snapshot()):
    fn(*a, **k)
snapshot = random.getstate()  # the generator as the snapshot holds it
draws = []
for _ in range(2):  # two environments restored from it (no fork: CPython re-seeds a forked child itself)
    random.setstate(snapshot)
    if sys.argv[1] == "hooks":
        for fn, a, k in hooks.get_after_restore():
            fn(*a, **k)
    draws.append(repr(random.random()))
print(" ".join(draws))
"""


@pytest.mark.parametrize("hooks", ["hooks", "no-hooks"])
def test_environments_restored_from_one_snapshot_draw_their_own_random_numbers(hooks, tmp_path):
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "AWS_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9",  # priming calls nothing: a closed port proves it
        "TOPOGOV_CLUSTER_NAME": "gpu-training",
        "TOPOGOV_POLICY_FILE": str(ROOT / "teams.yaml"),
        "TOPOGOV_SNAPSHOT_BUCKET": "bucket",
        "TOPOGOV_LEDGER_TABLE": "ledger",
        "TOPOGOV_COUNTERS_TABLE": "counters",
    }
    proc = subprocess.run(
        [sys.executable, "-c", RESTORES, hooks],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    first, second = proc.stdout.split()
    # without the after-restore hook both copies continue the snapshot's generator: the same numbers
    assert (first != second) == (hooks == "hooks"), (first, second)
