"""How the functions reach the Kubernetes API: EKS in production, a kubeconfig locally.

EKS, as ``aws eks get-token`` and aws-iam-authenticator do it: the endpoint and CA come from
``eks:DescribeCluster`` (once per warm container); the bearer token is ``k8s-aws-v1.`` + the
base64url of a presigned STS ``GetCallerIdentity`` URL whose signature covers the
``x-k8s-aws-id: <cluster>`` header. EKS accepts a token for 15 minutes; we mint a new one after
``TOKEN_REFRESH_S`` so a long pass never carries an expired token.
"""

from __future__ import annotations

import base64
import os
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from topogov.domain.errors import ConfigError

if TYPE_CHECKING:
    from kubernetes.client import ApiClient

TOKEN_PREFIX = "k8s-aws-v1."
CLUSTER_ID_HEADER = "x-k8s-aws-id"
PRESIGN_EXPIRES_S = 60
TOKEN_REFRESH_S = 10 * 60  # EKS honours a token for 15 minutes; refresh well before.


def eks_token(sts_client: Any, cluster_name: str) -> str:
    """A bearer token for EKS from a presigned STS GetCallerIdentity URL."""

    def add_cluster_header(request: Any, **_: Any) -> None:
        request.headers[CLUSTER_ID_HEADER] = cluster_name

    events = sts_client.meta.events
    handler_id = f"topogov-eks-{cluster_name}"
    events.register_first("before-sign.sts.GetCallerIdentity", add_cluster_header, unique_id=handler_id)
    try:
        url = sts_client.generate_presigned_url(
            "get_caller_identity", Params={}, ExpiresIn=PRESIGN_EXPIRES_S, HttpMethod="GET"
        )
    finally:
        events.unregister("before-sign.sts.GetCallerIdentity", unique_id=handler_id)
    return TOKEN_PREFIX + base64.urlsafe_b64encode(url.encode()).decode().rstrip("=")


@dataclass(frozen=True, slots=True)
class ClusterEndpoint:
    endpoint: str
    ca_data: bytes  # PEM


ACCESS_ENTRY_MODES = ("API", "API_AND_CONFIG_MAP")


def describe_cluster(eks_client: Any, cluster_name: str) -> ClusterEndpoint:
    """Endpoint and CA of the cluster. The functions' roles reach the cluster through EKS access
    entries, which only a cluster in authentication mode ``API`` or ``API_AND_CONFIG_MAP`` honours
    (EKS User Guide, grant-k8s-access.html, "Set cluster authentication mode"): a ``CONFIG_MAP``
    cluster would answer every call 401, so that is said here, once, with the fix."""
    cluster = eks_client.describe_cluster(name=cluster_name)["cluster"]
    mode = (cluster.get("accessConfig") or {}).get("authenticationMode")
    if mode is not None and mode not in ACCESS_ENTRY_MODES:
        raise ConfigError(
            f"EKS cluster {cluster_name!r} has authentication mode {mode}: Topogov's roles are granted "
            "access with access entries, which need API or API_AND_CONFIG_MAP. Run: aws eks "
            f"update-cluster-config --name {cluster_name} "
            "--access-config authenticationMode=API_AND_CONFIG_MAP"
        )
    ca = base64.b64decode(cluster["certificateAuthority"]["data"])
    return ClusterEndpoint(cluster["endpoint"], ca)


class EksTokenSource:
    """Mints tokens lazily and caches them until ``TOKEN_REFRESH_S`` has passed."""

    def __init__(
        self,
        sts_client: Any,
        cluster_name: str,
        *,
        refresh_s: float = TOKEN_REFRESH_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._sts = sts_client
        self._cluster = cluster_name
        self._refresh_s = refresh_s
        self._clock = clock
        self._token: str | None = None
        self._minted_at = 0.0
        self._lock = threading.Lock()
        self.minted = 0

    def token(self) -> str:
        with self._lock:
            now = self._clock()
            if self._token is None or now - self._minted_at >= self._refresh_s:
                self._token = eks_token(self._sts, self._cluster)
                self._minted_at = now
                self.minted += 1
            return self._token


def eks_api_client(endpoint: ClusterEndpoint, tokens: EksTokenSource) -> ApiClient:
    """A ``kubernetes.client.ApiClient`` for EKS whose token refreshes before every request."""
    from kubernetes.client.api_client import ApiClient
    from kubernetes.client.configuration import Configuration

    cfg: Any = Configuration()
    cfg.host = endpoint.endpoint
    fd, ca_path = tempfile.mkstemp(prefix="eks-ca-", suffix=".pem")
    with os.fdopen(fd, "wb") as fh:
        fh.write(endpoint.ca_data)
    cfg.ssl_ca_cert = ca_path
    cfg.verify_ssl = True
    cfg.api_key = {"BearerToken": tokens.token()}
    cfg.api_key_prefix = {"BearerToken": "Bearer"}

    def refresh(c: Any) -> None:
        c.api_key["BearerToken"] = tokens.token()

    cfg.refresh_api_key_hook = refresh
    cfg.connection_pool_maxsize = max(cfg.connection_pool_maxsize, POOL_SIZE)
    return ApiClient(configuration=cfg)


def kubeconfig_api_client(path: str | None = None, context: str | None = None) -> ApiClient:
    """A ``kubernetes.client.ApiClient`` from a kubeconfig (the local stack, or any real cluster)."""
    from kubernetes.client.api_client import ApiClient
    from kubernetes.client.configuration import Configuration
    from kubernetes.config import load_kube_config

    cfg: Any = Configuration()
    load_kube_config(config_file=path, context=context, client_configuration=cfg)
    hook = cfg.refresh_api_key_hook
    if hook is not None:
        cfg.refresh_api_key_hook = _throttled(hook, KUBECONFIG_REFRESH_S)
    cfg.connection_pool_maxsize = max(cfg.connection_pool_maxsize, POOL_SIZE)
    return ApiClient(configuration=cfg)


KUBECONFIG_REFRESH_S = 30.0
# Connections kept to the API server: at least the labeler's PATCHes in flight at once (its
# ``patch_concurrency`` is at most 32); the client's default is 5 per CPU, 5 on a 1-vCPU Lambda.
POOL_SIZE = 32


def _throttled(hook: Callable[[Any], None], every_s: float) -> Callable[[Any], None]:
    """The kubeconfig loader re-applies the whole configuration before *every* request (0.7 ms of
    CPU each, measured with cProfile over 2,000 patches); its tokens (exec plugins, OIDC) live for
    minutes, so re-checking every ``every_s`` seconds keeps them fresh at a fraction of the cost."""
    last = [float("-inf")]
    inner = [hook]

    def refresh(cfg: Any) -> None:
        now = time.monotonic()
        if now - last[0] >= every_s:
            last[0] = now
            inner[0](cfg)
            # The loader re-installs its own hook each time it runs: keep the newest behind ours.
            if cfg.refresh_api_key_hook is not refresh:
                inner[0] = cfg.refresh_api_key_hook
                cfg.refresh_api_key_hook = refresh

    return refresh
