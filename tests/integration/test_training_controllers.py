"""PyTorchJobs and JobSets on the local cluster: the real Kubeflow training operator v1.9.3 and JobSet
v0.11.1 run them, the real Kueue v0.17.0 admits and places them with topology-aware scheduling, KWOK
plays their pods (``ControlPlane(training_controllers=True)``, the ``training_cluster`` fixture).

The module's cluster holds a Topology of EC2's three network layers and the hostname, a TAS
ResourceFlavor, one ClusterQueue with its LocalQueue in a namespace that enforces Pod Security
``restricted``, and ten fake 8-GPU p5 nodes in three layer-3 domains: two of four nodes, one of two.
A job of four 8-GPU pods required in one layer-3 domain fits only in one of the four-node domains:

* a PyTorchJob (Master 1, Worker 3): admitted, its four pods Running in one domain, each with the
  operator's environment (``MASTER_ADDR``, ``RANK``, ...) and the Workers with the operator's init
  container as the stack configures it (restricted-compliant), the Master's Service with its
  EndpointSlice; deleted, its pods and Workload go;
* a JobSet (leader ×1, workers ×3): the same, through JobSet's defaulting webhook (Indexed Jobs,
  the headless Service whose EndpointSlice lists the pods' hostnames), its Pod webhook, and Kueue;
* an Indexed Job under a headless Service of our own: the EndpointSlice controller lists its pods'
  hostnames (``publishNotReadyAddresses``);
* last, ``ControlPlane.reset`` removes PyTorchJobs and JobSets (and what they made), in a namespace
  it keeps as in one it deletes.
"""

from __future__ import annotations

from typing import Any

import pytest

from topogov_local.processes import wait_until

K2 = "/apis/kueue.x-k8s.io/v1beta2"
PYTORCH = "/apis/kubeflow.org/v1"
JOBSET = "/apis/jobset.x-k8s.io/v1alpha2"
SLICES = "/apis/discovery.k8s.io/v1"
L1, L2, L3 = (f"topology.k8s.aws/network-node-layer-{i}" for i in (1, 2, 3))
HOSTNAME = "kubernetes.io/hostname"
ITYPE = "node.kubernetes.io/instance-type"
GPU = "nvidia.com/gpu"
NS = "team-a"
QUEUE = "team-a"
TOPOLOGY = "ec2-network"
FLAVOR = "p5.48xlarge"
DOMAINS = {"nn-l3-a": ("nn-l2-a", 4), "nn-l3-b": ("nn-l2-a", 4), "nn-l3-c": ("nn-l2-b", 2)}
WAIT_S = 180  # a loaded 2-core machine: Kueue's, the controllers' and KWOK's turns can each take seconds
PYTORCH_INIT_COMMAND = (  # training-operator@v1.9.3 pkg/controller.v1/pytorch/initcontainer.go, rendered
    "err=1;for i in $(seq 100); do if nslookup {master}; then err=0 && break; fi;echo waiting for master; "
    "sleep 2; done; exit $err"
)


def ok(http: Any, method: str, path: str, body: Any = None) -> Any:
    resp = http.request(method, path, body=body)
    assert resp.status in (200, 201, 202), f"{method} {path}: {resp.status} {resp.body}"
    return resp.body


def items(http: Any, path: str, selector: str | None = None) -> list[dict[str, Any]]:
    query = {"labelSelector": selector} if selector else None
    return list(http.request("GET", path, query=query).body.get("items") or [])


def kueue(http: Any, kind: str, plural: str, name: str, spec: dict[str, Any], namespace: str = "") -> None:
    scope = f"/namespaces/{namespace}" if namespace else ""
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    body = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": kind, "metadata": meta, "spec": spec}
    ok(http, "POST", f"{K2}{scope}/{plural}", body)


def node(name: str, layer3: str, layer2: str) -> dict[str, Any]:
    capacity = {GPU: "8", "cpu": "192", "memory": "2Ti", "pods": "110"}
    labels = {L1: "nn-l1", L2: layer2, L3: layer3, HOSTNAME: name, ITYPE: FLAVOR}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "annotations": {"kwok.x-k8s.io/node": "fake"}, "labels": labels},
        "status": {"capacity": capacity, "allocatable": capacity},
    }


def pod_spec(gpus: int, container: str = "main") -> dict[str, Any]:
    """A pod that Pod Security ``restricted`` admits, asking for ``gpus`` GPUs (none: a little CPU)."""
    res = {"cpu": "1", "memory": "1Gi", **({GPU: str(gpus)} if gpus else {})}
    return {
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": 1000,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [
            {
                "name": container,
                "image": "busybox",
                "command": ["sleep", "3600"],
                "resources": {"requests": res, "limits": res},
                "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
            }
        ],
    }


def tas_template(group: str, container: str = "main") -> dict[str, Any]:
    """An 8-GPU pod template required in one layer-3 domain, in pod-set group ``group``."""
    annotations = {
        "kueue.x-k8s.io/podset-required-topology": L3,
        "kueue.x-k8s.io/podset-group-name": group,
        "topogov.io/local-run-time": "3600s",  # KWOK keeps it Running
    }
    return {"metadata": {"annotations": annotations}, "spec": pod_spec(8, container)}


def ready_and_untainted(nodes: list[dict[str, Any]]) -> bool:
    def ready(n: dict[str, Any]) -> bool:
        return any(
            c["type"] == "Ready" and c["status"] == "True" for c in n["status"].get("conditions") or []
        )

    return all(ready(n) and not n["spec"].get("taints") for n in nodes)


def active(queue: dict[str, Any]) -> bool:
    conditions = (queue.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Active" and c["status"] == "True" for c in conditions)


@pytest.fixture(scope="module")
def cluster(training_cluster):
    """The module's cluster with its Topology, flavor, queues and nodes, all nodes Ready and untainted."""
    http = training_cluster.admin()
    kueue(
        http,
        "Topology",
        "topologies",
        TOPOLOGY,
        {"levels": [{"nodeLabel": x} for x in (L1, L2, L3, HOSTNAME)]},
    )
    kueue(
        http,
        "ResourceFlavor",
        "resourceflavors",
        FLAVOR,
        {"nodeLabels": {ITYPE: FLAVOR}, "topologyName": TOPOLOGY},
    )
    quota = {GPU: "80", "cpu": "1920", "memory": "20Ti"}
    flavor = {"name": FLAVOR, "resources": [{"name": k, "nominalQuota": v} for k, v in quota.items()]}
    groups = [{"coveredResources": list(quota), "flavors": [flavor]}]
    kueue(http, "ClusterQueue", "clusterqueues", QUEUE, {"namespaceSelector": {}, "resourceGroups": groups})
    restricted = {"pod-security.kubernetes.io/enforce": "restricted"}
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS, "labels": restricted}}
    ok(http, "POST", "/api/v1/namespaces", namespace)
    kueue(http, "LocalQueue", "localqueues", QUEUE, {"clusterQueue": QUEUE}, namespace=NS)
    for layer3, (layer2, count) in DOMAINS.items():
        for i in range(count):
            ok(http, "POST", "/api/v1/nodes", node(f"{layer3}-{i}", layer3, layer2))
    nodes = sum(count for _, count in DOMAINS.values())
    wait_until(
        lambda: len(found := items(http, "/api/v1/nodes")) == nodes and ready_and_untainted(found),
        "the nodes Ready and untainted",
        WAIT_S,
    )
    wait_until(
        lambda: active(ok(http, "GET", f"{K2}/clusterqueues/{QUEUE}")), "the ClusterQueue active", WAIT_S
    )
    return training_cluster


def running_pods(http: Any, selector: str, count: int) -> list[dict[str, Any]]:
    """The ``count`` pods of ``selector``, once each is Running on a node (else an AssertionError)."""

    def running() -> list[dict[str, Any]] | None:
        pods = items(http, f"/api/v1/namespaces/{NS}/pods", selector)
        bound = [p for p in pods if p["status"].get("phase") == "Running" and p["spec"].get("nodeName")]
        return pods if len(pods) == len(bound) == count else None

    pods: list[dict[str, Any]] = wait_until(running, f"{count} pods of {selector} Running", WAIT_S)
    return pods


def layer3_of(http: Any, pods: list[dict[str, Any]]) -> set[str]:
    labels = {n["metadata"]["name"]: n["metadata"]["labels"] for n in items(http, "/api/v1/nodes")}
    return {labels[p["spec"]["nodeName"]][L3] for p in pods}


def owned_workloads(http: Any, owner: str) -> list[dict[str, Any]]:
    return [
        w
        for w in items(http, f"{K2}/namespaces/{NS}/workloads")
        if any(r["name"] == owner for r in w["metadata"].get("ownerReferences") or [])
    ]


def admitted_workload(http: Any, owner: str) -> dict[str, Any]:
    def admitted() -> dict[str, Any] | None:
        for w in owned_workloads(http, owner):
            conditions = (w.get("status") or {}).get("conditions") or []
            if any(c["type"] == "Admitted" and c["status"] == "True" for c in conditions):
                return w
        return None

    workload: dict[str, Any] = wait_until(admitted, f"the Workload of {owner} admitted", WAIT_S)
    return workload


def delete_and_wait(http: Any, path: str, selector: str, owner: str) -> None:
    """Delete the job at ``path``; it, its pods and its Workload go (the garbage collector, Kueue)."""
    ok(http, "DELETE", path)
    wait_until(lambda: http.request("GET", path).status == 404, f"{path} gone", WAIT_S)
    wait_until(
        lambda: not items(http, f"/api/v1/namespaces/{NS}/pods", selector), f"no pod of {owner}", WAIT_S
    )
    wait_until(lambda: not owned_workloads(http, owner), f"no Workload of {owner}", WAIT_S)


def endpoints(http: Any, namespace: str, service: str) -> list[dict[str, Any]]:
    """The endpoints of the EndpointSlices of ``service``."""
    path = f"{SLICES}/namespaces/{namespace}/endpointslices"
    return [
        e
        for s in items(http, path, f"kubernetes.io/service-name={service}")
        for e in s.get("endpoints") or []
    ]


def endpoint_hostnames(http: Any, namespace: str, service: str) -> set[str]:
    return {e.get("hostname", "") for e in endpoints(http, namespace, service)}


def endpoint_addresses(http: Any, namespace: str, service: str) -> set[str]:
    return {a for e in endpoints(http, namespace, service) for a in e["addresses"]}


def test_a_pytorchjob_is_admitted_by_kueue_and_runs_in_one_layer3_domain_with_the_operators_env(cluster):
    http = cluster.admin()
    name = "ddp"
    template = tas_template(name, container="pytorch")  # the container the operator sets its env on
    replicas = {
        "Master": {"replicas": 1, "restartPolicy": "OnFailure", "template": template},
        "Worker": {"replicas": 3, "restartPolicy": "OnFailure", "template": template},
    }
    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": NS, "labels": {"kueue.x-k8s.io/queue-name": QUEUE}},
        "spec": {"runPolicy": {"suspend": True}, "pytorchReplicaSpecs": replicas},
    }
    ok(http, "POST", f"{PYTORCH}/namespaces/{NS}/pytorchjobs", job)
    workload = admitted_workload(http, name)
    assert [(ps["name"], ps["count"]) for ps in workload["spec"]["podSets"]] == [("master", 1), ("worker", 3)]
    selector = f"training.kubeflow.org/job-name={name}"
    pods = running_pods(http, selector, 4)

    assert len(layer3_of(http, pods)) == 1, {p["metadata"]["name"]: p["spec"]["nodeName"] for p in pods}
    assert len({p["spec"]["nodeName"] for p in pods}) == 4
    ranks = {}
    for pod in pods:
        (container,) = [c for c in pod["spec"]["containers"] if c["name"] == "pytorch"]
        env = {e["name"]: e.get("value") for e in container.get("env") or []}
        assert env["MASTER_ADDR"] == env["PET_MASTER_ADDR"] == f"{name}-master-0"
        assert env["MASTER_PORT"] == env["PET_MASTER_PORT"] == "23456"  # the defaulted pytorchjob-port
        assert (env["WORLD_SIZE"], env["PET_NNODES"], env["PET_NPROC_PER_NODE"]) == ("4", "4", "auto")
        assert env["PET_NODE_RANK"] == env["RANK"]
        ranks[pod["metadata"]["name"]] = env["RANK"]
        init = pod["spec"].get("initContainers") or []
        if pod["metadata"]["labels"]["training.kubeflow.org/replica-type"] == "worker":
            (waiter,) = init  # the stack's template: Pod Security restricted admitted the pod
            assert (waiter["name"], waiter["image"]) == ("init-pytorch", "alpine:3.10")
            assert waiter["command"] == ["sh", "-c", PYTORCH_INIT_COMMAND.format(master=f"{name}-master-0")]
            assert waiter["securityContext"]["capabilities"] == {"drop": ["ALL"]}
        else:
            assert init == []
    expected = {f"{name}-master-0": "0", **{f"{name}-worker-{i}": str(i + 1) for i in range(3)}}
    assert ranks == expected

    # the operator's headless Service per replica; the EndpointSlice controller lists the Master (Ready)
    master = next(p for p in pods if p["metadata"]["name"] == f"{name}-master-0")
    assert ok(http, "GET", f"/api/v1/namespaces/{NS}/services/{name}-master-0")["spec"]["clusterIP"] == "None"
    wait_until(
        lambda: endpoint_addresses(http, NS, f"{name}-master-0") == {master["status"]["podIP"]},
        "the Master's Service's EndpointSlice lists its pod",
        WAIT_S,
    )

    delete_and_wait(http, f"{PYTORCH}/namespaces/{NS}/pytorchjobs/{name}", selector, name)


def test_a_jobset_is_defaulted_admitted_by_kueue_and_runs_in_one_layer3_domain(cluster):
    http = cluster.admin()
    name = "js"

    def replicated(rjob: str, pods: int) -> dict[str, Any]:
        spec = {"parallelism": pods, "completions": pods, "backoffLimit": 0, "template": tas_template(name)}
        return {"name": rjob, "replicas": 1, "template": {"spec": spec}}

    jobset = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": NS, "labels": {"kueue.x-k8s.io/queue-name": QUEUE}},
        "spec": {"suspend": True, "replicatedJobs": [replicated("leader", 1), replicated("workers", 3)]},
    }
    created = ok(http, "POST", f"{JOBSET}/namespaces/{NS}/jobsets", jobset)
    # JobSet's defaulting webhook ran: its controller reads these without a nil check
    assert created["spec"]["successPolicy"]["operator"] == "All"
    assert created["spec"]["startupPolicy"]["startupPolicyOrder"] == "AnyOrder"
    assert created["spec"]["network"] == {"enableDNSHostnames": True, "publishNotReadyAddresses": True}
    assert {r["template"]["spec"]["completionMode"] for r in created["spec"]["replicatedJobs"]} == {"Indexed"}

    workload = admitted_workload(http, name)
    assert [(ps["name"], ps["count"]) for ps in workload["spec"]["podSets"]] == [
        ("leader", 1),
        ("workers", 3),
    ]
    selector = f"jobset.sigs.k8s.io/jobset-name={name}"
    pods = running_pods(http, selector, 4)
    assert len(layer3_of(http, pods)) == 1, {p["metadata"]["name"]: p["spec"]["nodeName"] for p in pods}
    assert len({p["spec"]["nodeName"] for p in pods}) == 4
    hostnames = {p["spec"]["hostname"] for p in pods}
    assert hostnames == {f"{name}-leader-0-0", *(f"{name}-workers-0-{i}" for i in range(3))}
    assert {p["spec"]["subdomain"] for p in pods} == {name}
    priority = {p["metadata"]["labels"].get("jobset.sigs.k8s.io/priority") for p in pods}
    assert priority == {"0"}  # JobSet's Pod webhook ran too

    # JobSet's headless Service (publishNotReadyAddresses) and its EndpointSlice with the hostnames
    service = ok(http, "GET", f"/api/v1/namespaces/{NS}/services/{name}")
    assert service["spec"]["clusterIP"] == "None" and service["spec"]["publishNotReadyAddresses"] is True
    wait_until(lambda: endpoint_hostnames(http, NS, name) == hostnames, "the JobSet's EndpointSlice", WAIT_S)

    delete_and_wait(http, f"{JOBSET}/namespaces/{NS}/jobsets/{name}", selector, name)
    jobs = f"/apis/batch/v1/namespaces/{NS}/jobs"
    wait_until(lambda: not items(http, jobs, selector), "its Jobs gone", WAIT_S)


def test_a_headless_service_gets_an_endpointslice_with_its_indexed_pods_hostnames(cluster):
    http = cluster.admin()
    ns, name = "dns", "indexed"
    ok(
        http,
        "POST",
        "/api/v1/namespaces",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
    )
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "workers", "namespace": ns},
        "spec": {"clusterIP": "None", "publishNotReadyAddresses": True, "selector": {"app": name}},
    }
    ok(http, "POST", f"/api/v1/namespaces/{ns}/services", service)
    pod = {**pod_spec(0), "subdomain": "workers", "restartPolicy": "Never"}
    template = {
        "metadata": {"labels": {"app": name}, "annotations": {"topogov.io/local-run-time": "3600s"}},
        "spec": pod,
    }
    spec = {"completionMode": "Indexed", "completions": 3, "parallelism": 3, "template": template}
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": ns}, "spec": spec}
    ok(http, "POST", f"/apis/batch/v1/namespaces/{ns}/jobs", job)

    hostnames = {f"{name}-{i}" for i in range(3)}  # the Job controller's, by completion index
    wait_until(lambda: endpoint_hostnames(http, ns, "workers") == hostnames, "the slice's hostnames", WAIT_S)
    pods = items(http, f"/api/v1/namespaces/{ns}/pods", f"app={name}")
    addresses = endpoint_addresses(http, ns, "workers")
    assert addresses == {p["status"]["podIP"] for p in pods} and len(addresses) == 3

    path = f"/apis/batch/v1/namespaces/{ns}/jobs/{name}"
    assert http.request("DELETE", path, query={"propagationPolicy": "Background"}).status == 200
    wait_until(
        lambda: not items(http, f"/api/v1/namespaces/{ns}/pods", f"app={name}"), "its pods gone", WAIT_S
    )


def test_a_reset_removes_pytorchjobs_and_jobsets_and_what_they_made(cluster):
    """Last of the module: ``ControlPlane.reset`` empties the cluster, the module's set-up included."""
    http = cluster.admin()
    template = {"spec": {**pod_spec(0, "pytorch"), "restartPolicy": "Never"}}
    for ns in ("default", NS):  # a namespace the reset keeps, and one it deletes
        replicas = {
            "Master": {"replicas": 1, "template": template},
            "Worker": {"replicas": 1, "template": template},
        }
        job = {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "metadata": {"name": "left", "namespace": ns},  # no queue: the operator runs it at once
            "spec": {"pytorchReplicaSpecs": replicas},
        }
        ok(http, "POST", f"{PYTORCH}/namespaces/{ns}/pytorchjobs", job)
        rjob = {"name": "all", "replicas": 1, "template": {"spec": {"template": template}}}
        jobset = {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "metadata": {"name": "left", "namespace": ns},
            "spec": {"replicatedJobs": [rjob]},
        }
        ok(http, "POST", f"{JOBSET}/namespaces/{ns}/jobsets", jobset)
        wait_until(
            lambda ns=ns: len(items(http, f"/api/v1/namespaces/{ns}/pods")) == 3,
            f"their pods in {ns}",
            WAIT_S,
        )

    cluster.reset()

    assert items(http, f"{PYTORCH}/pytorchjobs") == [] and items(http, f"{JOBSET}/jobsets") == []
    wait_until(lambda: not items(http, "/apis/batch/v1/jobs"), "no Job left", WAIT_S)  # a JobSet's, at most
    wait_until(lambda: not items(http, "/api/v1/namespaces/default/pods"), "no pod left in default", WAIT_S)
