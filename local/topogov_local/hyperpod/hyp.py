"""AWS's HyperPod CLI, ``hyp`` (sagemaker-hyperpod 3.12.0, unmodified, in ``.venv/hyp``: ``make hyp-tools``),
run against the local ``--hyperpod`` stack as a data scientist runs it against a HyperPod cluster.

What ``hyp``'s job commands need is a kubeconfig context, nothing of AWS (``hyp set-cluster-context``,
which calls STS, SageMaker and EKS, is not needed): :func:`write_kubeconfig` writes one to the stack's
API server whose context sets the team's namespace (``hyp create`` puts the job in the context's
namespace when given no ``--namespace``, as ``set-cluster-context --namespace`` would set it).

Telemetry. Every ``hyp`` command, after its work, GETs a URL on S3
(``sagemaker/hyperpod/common/telemetry/telemetry_logging.py``), with no off switch and no timeout. It
first runs ``kubectl config current-context`` and reads the Region from the first
``[a-z]{2}-[a-z]+-\\d`` of the context's name; when that is not one of AWS's Regions it logs "Region
not found in supported regions" and sends nothing. So the context is named :data:`CONTEXT`
(``topogov-local-0``: the match ``ov-local-0`` is no Region; a name with no match at all would fall
back to ``us-east-2`` and send), ``kubectl`` must be on the ``PATH`` (without it the same fallback
applies), and, in case a later release changes that rule, the proxy variables point at a closed port
on this machine (:data:`NO_PROXY_HERE` keeps the API server direct): no byte leaves the machine and
nothing waits on a network. ``tests/e2e/test_hyp_cli_local.py`` checks it with a proxy that counts
the connections it is asked for.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[3]
HYP = REPO / ".venv" / "hyp" / "bin" / "hyp"
CONTEXT = "topogov-local-0"
CLOSED_PROXY = "http://127.0.0.1:9"  # the discard port: nothing listens there, a connection is refused
NO_PROXY_HERE = "127.0.0.1,localhost"


def available() -> bool:
    return HYP.is_file() and os.access(HYP, os.X_OK)


def missing_reason() -> str:
    return f"hyp is not installed ({HYP}): `make hyp-tools` (part of `make install`) installs it"


def write_kubeconfig(stack: Any, namespace: str) -> Path:
    """A kubeconfig for ``hyp`` (``<stack>/hyp/<namespace>.kubeconfig``): the stack's API server as its
    admin, context :data:`CONTEXT` with ``namespace``."""
    admin = yaml.safe_load(Path(stack.kubeconfig).read_text())
    cluster = admin["clusters"][0]["cluster"]
    user = admin["users"][0]["user"]
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": CONTEXT, "cluster": cluster}],
        "users": [{"name": CONTEXT, "user": user}],
        "contexts": [
            {"name": CONTEXT, "context": {"cluster": CONTEXT, "user": CONTEXT, "namespace": namespace}}
        ],
        "current-context": CONTEXT,
    }
    path = Path(stack.dir) / "hyp" / f"{namespace}.kubeconfig"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    path.chmod(0o600)
    return path


def environment(
    kubeconfig: Path, *, proxy: str = CLOSED_PROXY, base: Mapping[str, str] | None = None
) -> dict[str, str]:
    """``hyp``'s environment: ``base`` (this process's) without AWS's, Topogov's or another cluster's
    settings, the kubeconfig, ``kubectl``'s directory on the ``PATH``, every proxy variable at
    ``proxy`` but for this machine."""
    env = {
        k: v
        for k, v in (os.environ if base is None else base).items()
        if not k.startswith(("AWS_", "TOPOGOV_", "KUBECONFIG")) and k.lower() not in _PROXY_VARS
    }
    kubectl = shutil.which("kubectl")
    if kubectl:
        env["PATH"] = os.pathsep.join([str(Path(kubectl).parent), env.get("PATH", "")])
    env["KUBECONFIG"] = str(kubeconfig)
    env["AWS_EC2_METADATA_DISABLED"] = "true"
    for name in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"):
        env[name] = proxy
    env["NO_PROXY"] = env["no_proxy"] = NO_PROXY_HERE
    return env


_PROXY_VARS = {"https_proxy", "http_proxy", "no_proxy", "all_proxy"}


def run(
    stack: Any, *args: str, namespace: str, proxy: str = CLOSED_PROXY, timeout_s: float = 180
) -> subprocess.CompletedProcess[str]:
    """``hyp ARGS`` against ``stack``, in ``namespace``'s context (output captured)."""
    env = environment(write_kubeconfig(stack, namespace), proxy=proxy)
    return subprocess.run(
        [str(HYP), *args], env=env, capture_output=True, text=True, timeout=timeout_s, check=False
    )


def create_command(
    job: str, *, image: str, queue: str, priority: str, nodes: int = 4,
    instance_type: str = "ml.p5.48xlarge", topology: str = "topology.k8s.aws/network-node-layer-3",
) -> list[str]:  # fmt: skip
    """The arguments of ``hyp create hyp-pytorch-job`` as docs/hyperpod.md shows it."""
    return [
        "create", "hyp-pytorch-job", "--job-name", job, "--image", image, "--pull-policy", "Always",
        "--tasks-per-node", "1", "--max-retry", "1", "--node-count", str(nodes),
        "--instance-type", instance_type, "--preferred-topology", topology,
        "--queue-name", queue, "--priority", priority,
    ]  # fmt: skip
