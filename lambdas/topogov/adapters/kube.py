"""Kubernetes adapter: the `kubernetes` client's ApiClient (auth, TLS, connection pool) over raw paths.

Why not the generated ``CoreV1Api``: importing it costs ~1.4 s of CPU on top of the 0.6 s the
package itself costs (measured with ``python -X importtime`` on kubernetes 37.0.1), and its model
deserialisation of a 10,000-node list costs seconds more. The labeler needs five calls, so it
speaks to the API server through ``ApiClient.param_serialize``/``call_api`` and parses JSON itself.

Retries: 409, 429 and 5xx (and connection errors) are retried with exponential backoff and
jitter, honouring ``Retry-After``; 404 is an answer, not an error.
"""

from __future__ import annotations

import enum
import json
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from topogov.domain.errors import KubernetesError
from topogov.domain.placement_quality import JobPod
from topogov.domain.quantity import Resources
from topogov.domain.views.batch import PodView
from topogov.domain.views.nodes import NodeView

RETRYABLE = frozenset({409, 429, 500, 502, 503, 504})
MERGE_PATCH = "application/merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"  # server-side apply (a JSON body is YAML)


@dataclass(slots=True)
class CallCounters:
    reads: int = 0
    writes: int = 0
    retries: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def count(self, method: str, retry: bool = False) -> None:
        """One request (the labeler's PATCHes run on several threads)."""
        with self._lock:
            if retry:
                self.retries += 1
            elif method == "GET":
                self.reads += 1
            else:
                self.writes += 1


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    body: Any


@dataclass(frozen=True, slots=True)
class Page:
    """One page of a list: its items (a 200's), the response, and whether the list started over
    with it (every item of the pages before it is to be dropped)."""

    items: list[dict[str, Any]]
    response: Response
    restarted: bool = False


MAX_LIST_RESTARTS = 3  # a list whose continue token keeps expiring gives up with the 410


class KubeHttp:
    """A thin JSON-over-HTTP layer on a configured ``kubernetes.client.ApiClient``."""

    def __init__(
        self,
        api_client: Any,
        *,
        max_attempts: int = 5,
        backoff_base_s: float = 0.2,
        backoff_cap_s: float = 5.0,
        timeout_s: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._client = api_client
        self._max_attempts = max_attempts
        self._backoff_base_s = backoff_base_s
        self._backoff_cap_s = backoff_cap_s
        self._timeout_s = timeout_s
        self._sleep = sleep
        self.counters = CallCounters()

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        retry: bool = True,
    ) -> Response:
        """One API call with retries; returns the final status and parsed body (404 included)."""
        attempt = 0
        while True:
            attempt += 1
            self.counters.count(method)
            status, payload, retry_after = self._once(method, path, query, body, content_type)
            if status in RETRYABLE and retry and attempt < self._max_attempts:
                self.counters.count(method, retry=True)
                delay = min(self._backoff_cap_s, self._backoff_base_s * 2 ** (attempt - 1))
                delay = max(retry_after or 0.0, delay * (0.5 + random.random() / 2))
                self._sleep(delay)
                continue
            return Response(status, payload)

    def pages(
        self, path: str, query: Mapping[str, Any] | None = None, *, page_size: int = 500
    ) -> Iterator[Page]:
        """A list read page by page (``limit`` and ``continue``), the one pager of the adapters.

        A continue token expires once etcd compacts the revision the list reads at: the API server
        answers 410 Expired, and "if the client needs a consistent list, it must restart their list
        without the continue field" (the Kubernetes API reference, ``ListOptions.continue``;
        client-go's ``tools/pager`` does so). The list starts over, and the page that starts it says
        so (:attr:`Page.restarted`); after :data:`MAX_LIST_RESTARTS` the 410 is the answer. Any
        status but 200 ends the pages with that page (no items): each caller answers it its way."""
        token: str | None = None
        restarted = False
        restarts = 0
        while True:
            q = {**(query or {}), "limit": page_size}
            if token:
                q["continue"] = token
            resp = self.request("GET", path, query=q)
            if resp.status == 410 and token and restarts < MAX_LIST_RESTARTS:
                token, restarted, restarts = None, True, restarts + 1
                continue
            if resp.status != 200:
                yield Page([], resp, restarted)
                return
            yield Page(list(resp.body.get("items") or []), resp, restarted)
            restarted = False
            token = (resp.body.get("metadata") or {}).get("continue") or None
            if not token:
                return

    def list_all(
        self, path: str, query: Mapping[str, Any] | None = None, *, page_size: int = 500
    ) -> tuple[list[dict[str, Any]], Response]:
        """Every item of a list (:meth:`pages`, restarts honoured) and the last response: its
        status is 200 unless the list failed (then the items are none)."""
        items: list[dict[str, Any]] = []
        last = Response(200, None)
        for page in self.pages(path, query, page_size=page_size):
            if page.restarted:
                items.clear()
            last = page.response
            if last.status != 200:
                return [], last
            items.extend(page.items)
        return items, last

    def _once(
        self, method: str, path: str, query: Mapping[str, Any] | None, body: Any, content_type: str
    ) -> tuple[int, Any, float | None]:
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type
        try:
            req = self._client.param_serialize(
                method,
                path,
                query_params=[(k, v) for k, v in (query or {}).items() if v is not None],
                header_params=headers,
                body=body,
                auth_settings=["BearerToken"],
            )
            resp = self._client.call_api(*req, _request_timeout=self._timeout_s)
            raw = resp.read()
        except Exception as exc:  # urllib3 connection errors, TLS errors, timeouts
            # Reported as a 503-like transient failure so the caller's retry policy applies.
            return 503, {"message": f"{type(exc).__name__}: {exc}"}, None
        try:
            payload = _decode(raw) if raw else None
        except ValueError:
            payload = {"message": raw[:200].decode("utf-8", "replace")}
        retry_after = None
        header = resp.getheader("Retry-After") if hasattr(resp, "getheader") else None
        if header:
            try:
                retry_after = float(header)
            except ValueError:
                retry_after = None
        return resp.status, payload, retry_after


def _decode(raw: bytes) -> Any:
    """``json.loads`` with the cyclic garbage collector paused: a page of 500 pods is ~100,000 new
    objects, and each collection it triggers walks everything the pass holds (10,000 nodes' views);
    decoded JSON has no reference cycles, so there is nothing for it to find. Halves a 10,000-node,
    20,000-pod pass's decoding CPU (``topogov bench reconcile``)."""
    import gc

    if not gc.isenabled():
        return json.loads(raw)
    gc.disable()
    try:
        return json.loads(raw)
    finally:
        gc.enable()


class PatchOutcome(enum.StrEnum):
    PATCHED = "patched"
    GONE = "gone"  # deleted between list and patch
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class PatchResult:
    outcome: PatchOutcome
    status: int
    message: str = ""
    labels: Mapping[str, str] | None = None


class KubeNodes:
    """Nodes and pods as the labeler needs them."""

    def __init__(self, http: KubeHttp, *, page_size: int = 500) -> None:
        self.http = http
        self._page_size = page_size

    @property
    def counters(self) -> CallCounters:
        return self.http.counters

    def list_nodes(self) -> list[NodeView]:
        items, resp = self.http.list_all("/api/v1/nodes", page_size=self._page_size)
        if resp.status != 200:
            raise KubernetesError(resp.status, "list /api/v1/nodes", _message(resp.body))
        return [NodeView.from_api(i) for i in items]

    def get_node(self, name: str) -> NodeView | None:
        resp = self.http.request("GET", f"/api/v1/nodes/{name}")
        if resp.status == 404:
            return None
        if resp.status != 200:
            raise KubernetesError(resp.status, f"get node {name}", _message(resp.body))
        return NodeView.from_api(resp.body)

    def patch_labels(self, name: str, patch: Mapping[str, str | None]) -> PatchResult:
        """Merge-patch only the given labels (None removes). Never raises: one node never stops a pass."""
        resp = self.http.request(
            "PATCH",
            f"/api/v1/nodes/{name}",
            body={"metadata": {"labels": dict(patch)}},
            content_type=MERGE_PATCH,
        )
        if 200 <= resp.status < 300:
            labels = ((resp.body or {}).get("metadata") or {}).get("labels") or {}
            return PatchResult(PatchOutcome.PATCHED, resp.status, labels=labels)
        if resp.status == 404:
            return PatchResult(PatchOutcome.GONE, 404, _message(resp.body))
        return PatchResult(PatchOutcome.FAILED, resp.status, _message(resp.body))

    def addon_namespaces(self) -> list[str]:
        """The namespaces SageMaker HyperPod task governance's add-on made (labelled
        ``sagemaker.amazonaws.com/sagemaker-managed-queue=true``): one list, by label selector."""
        from topogov.domain.hyperpod.mode import ADDON_SELECTOR

        items, resp = self.http.list_all("/api/v1/namespaces", {"labelSelector": ADDON_SELECTOR})
        if resp.status != 200:
            raise KubernetesError(resp.status, "list /api/v1/namespaces", _message(resp.body))
        return sorted(str((i.get("metadata") or {}).get("name", "")) for i in items)

    def requested_by_node(self) -> dict[str, Resources]:
        """Sum of the requests of every pod bound to a node and not finished, per node."""
        return self.scan_pods()[0]

    def scan_pods(self) -> tuple[dict[str, Resources], list[JobPod]]:
        """One paginated list of the unfinished pods: the sum of their requests per node, and the
        Running pods Kueue admitted for Jobs (for the placement quality), from the same pages."""
        from topogov.domain.placement_quality import job_pod

        result: dict[str, Resources] = {}
        placed: list[JobPod] = []
        selector = "status.phase!=Succeeded,status.phase!=Failed"
        for page in self.http.pages("/api/v1/pods", {"fieldSelector": selector}, page_size=self._page_size):
            if page.restarted:  # a continue token expired: the sums start over with the list
                result.clear()
                placed.clear()
            if page.response.status != 200:
                raise KubernetesError(page.response.status, "list /api/v1/pods", _message(page.response.body))
            for pod in map(PodView.from_api, page.items):
                node = pod.node_name
                if node:
                    asked = pod.requests
                    result[node] = result.get(node, Resources()) + asked
                    found = job_pod(pod, asked.gpu)
                    if found is not None:
                        placed.append(found)
        return result, placed

    def pod_defaults(self) -> dict[str, Any]:
        """The cluster's LimitRanges and RuntimeClasses as the API charges jobs with them
        (``domain/podrequests.defaults_record``): one list of each."""
        from topogov.domain.podrequests import defaults_record

        ranges, resp = self.http.list_all("/api/v1/limitranges")
        if resp.status != 200:
            raise KubernetesError(resp.status, "list /api/v1/limitranges", _message(resp.body))
        classes, resp = self.http.list_all("/apis/node.k8s.io/v1/runtimeclasses")
        if resp.status not in (200, 404):
            raise KubernetesError(resp.status, "list runtimeclasses", _message(resp.body))
        return defaults_record(ranges, classes if resp.status == 200 else [])


def _message(body: Any) -> str:
    if isinstance(body, Mapping):
        return str(body.get("message", ""))[:500]
    return str(body)[:500]
