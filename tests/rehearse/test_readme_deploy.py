"""The deploy block of docs/deploying.md (the README's deploy guide) runs as written (issue 22), on
a machine without Go.

The block marked ``<!-- readme-test: deploy -->`` is run command by command, in bash, in a copy of
the repository's files (what ``git ls-files`` lists, as a fresh clone has them: no ``.venv``, no
``node_modules``), with a ``PATH`` that has no ``go``, against the local AWS emulator (the deployer's
credentials are moto's default account's) and a local cluster whose admin kubeconfig is the one the
block's ``KUBECONFIG`` names. Only the values of the block's first line are the emulator's (cluster,
account, Region, kubeconfig); the one edit the block asks of its reader — teams.yaml's example
principals replaced by the platform team's own — is made as a reader would. The account has API
Gateway's CloudWatch role (the README's preflight paragraph: the stack does not create it by default).

``make deploy-tools`` installs from the package registries (pip's and npm's caches make it quick on a
machine that ran ``make install``)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import LAYER_CACHE_ENV
from tests.e2e.test_readme import blocks, commands
from tests.rehearse.conftest import ROOT
from topogov_local.rehearse import ACCOUNT, REGION, Emulator

MARK = "<!-- readme-test: deploy -->"
CLUSTER = "readme-eks"
OWN_ACCOUNT = "210987654321"  # the reader's own: neither of the README's example accounts
EXIT = re.compile(r"#\s*exit (\d+)")


def deploy_block() -> str:
    (block,) = blocks((ROOT / "docs" / "deploying.md").read_text(), MARK)
    return block


def fresh_copy(into: Path) -> Path:
    """The repository's files as a fresh clone has them (tracked, and new files not ignored)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, check=True,
    ).stdout.decode().split("\0")  # fmt: skip
    for name in filter(None, listed):
        src = ROOT / name
        if src.is_file():
            dest = into / name
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest)
    return into


def path_without_go() -> str:
    """This machine's PATH less every directory holding a ``go`` (a platform engineer's machine)."""
    keep = [d for d in os.environ.get("PATH", "").split(":") if d and not (Path(d) / "go").exists()]
    return ":".join(keep)


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: Any) -> Iterator[dict[str, Any]]:
    from topogov_local.cluster.controlplane import ControlPlane

    directory = tmp_path_factory.mktemp("readme-deploy")
    clone = fresh_copy(directory / "clone")
    teams = clone / "teams.yaml"  # the reader's edit: their own principals for the examples
    teams.write_text(
        teams.read_text().replace("111122223333", OWN_ACCOUNT).replace("123456789012", OWN_ACCOUNT)
    )
    emulator = Emulator(directory / "aws").start()
    cluster = None
    try:
        cluster = ControlPlane(directory / "cluster").start()
        assert cluster.pki is not None
        emulator.register_cluster(CLUSTER, cluster.apiserver_url, cluster.pki.ca.read_bytes())
        role = f"arn:aws:iam::{ACCOUNT}:role/apigateway-cloudwatch"
        emulator.client("apigateway").update_account(
            patchOperations=[{"op": "replace", "path": "/cloudwatchRoleArn", "value": role}]
        )
        # a platform engineer's shell: none of the run's AWS, CDK or Topogov settings, and Python
        # writes its bytecode (the venv `make deploy-tools` makes is installed without it)
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("AWS_", "CDK_", "TOPOGOV_", "KUBECONFIG", "PYTHONDONTWRITEBYTECODE"))
        }
        # the one variable of the run kept: the layer's pip install made once per run (the same pins;
        # infra/layer.py), so the block's synths bundle it without a pip run of their own
        env[LAYER_CACHE_ENV] = os.environ[LAYER_CACHE_ENV]
        env.update(
            {
                "PATH": path_without_go(),
                "AWS_ENDPOINT_URL": emulator.url,
                "AWS_ACCESS_KEY_ID": "testing",
                "AWS_SECRET_ACCESS_KEY": "testing",
                "AWS_DEFAULT_REGION": REGION,
                "AWS_EC2_METADATA_DISABLED": "true",
                "CDK_DISABLE_VERSION_CHECK": "1",
                "CDK_DISABLE_CLI_TELEMETRY": "true",  # as every CDK run of the tests (rehearse/cdk.py)
                # the CDK's own template validation, which only warns, is run and asserted once per
                # template shape (tests/infra/test_template_checks.py), not at this block's synths
                "CDK_VALIDATION": os.environ.get("CDK_VALIDATION", "false"),
            }
        )
        kubeconfig = cluster.direct_kubeconfig
        first = f"export CLUSTER={CLUSTER} ACCOUNT={ACCOUNT} REGION={REGION} KUBECONFIG={kubeconfig}"
        yield {"clone": clone, "env": env, "exports": first, "emulator": emulator, "cluster": cluster}
    finally:  # nothing started here outlives the module, whatever failed
        if cluster is not None:
            cluster.stop()
        emulator.stop()


def test_the_deploy_block_is_the_order_the_issue_asks():
    cmds = [c.split()[0] + " " + c.split()[1] for c in commands(deploy_block()) if not c.startswith("export")]
    assert cmds == [
        "make deploy-tools",
        ".venv/bin/topogov policy",
        "npx cdk",  # bootstrap
        "kubectl apply",  # RBAC before the stack: the first pass is not refused
        ".venv/bin/topogov preflight",
        "npx cdk",  # diff
        "npx cdk",  # deploy
    ]
    assert "go" not in deploy_block().split()


def test_the_deploy_block_runs_as_written_without_go(deployment: dict[str, Any]) -> None:
    clone, env = deployment["clone"], deployment["env"]
    assert shutil.which("go", path=env["PATH"]) is None
    block = commands(deploy_block())
    assert block[0].startswith("export CLUSTER=") and "KUBECONFIG=" in block[0]
    for command in block[1:]:
        expected = int(m.group(1)) if (m := EXIT.search(command.split("\n")[0])) else 0
        out = subprocess.run(
            ["bash", "-c", f"{deployment['exports']}\n{command}"],
            cwd=clone, env=env, capture_output=True, text=True, timeout=900, check=False,
        )  # fmt: skip
        assert out.returncode == expected, f"$ {command}\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
        assert "Traceback" not in out.stderr, out.stderr[-3000:]
    # Then the stack is deployed, with its access entries on the cluster and the RBAC in place
    cf = deployment["emulator"].client("cloudformation")
    (stack,) = cf.describe_stacks(StackName="Topogov")["Stacks"]
    assert stack["StackStatus"] == "CREATE_COMPLETE"
    outputs = {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}
    assert outputs["ApiInvokeArn"].startswith(f"arn:aws:execute-api:{REGION}:{ACCOUNT}:")
    entries = deployment["emulator"].client("eks").list_access_entries(clusterName=CLUSTER)["accessEntries"]
    assert {outputs["ReconcilerRoleArn"], outputs["ApiRoleArn"]} <= set(entries)
    bindings = deployment["cluster"].admin().request(
        "GET", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings"
    ).body["items"]  # fmt: skip
    assert any("topogov" in b["metadata"]["name"] for b in bindings)
