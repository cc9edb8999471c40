"""A submitted manifest's checks (domain/manifests): one case per refused field, each naming the field
and why, and what Kubernetes and Kueue would count for it (the charge of every pod set)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from topogov.domain.manifests import ManifestProblem, inspect_manifest
from topogov.domain.podrequests import summarize_limit_ranges
from topogov.domain.policy.pods import PodRules
from topogov.domain.quantity import Resources

NS, QUEUE = "hyperpod-ns-team-a", "hyperpod-ns-team-a-localqueue"
T = "manifest.spec.template"
S = f"{T}.spec"


def job(**pod_spec: Any) -> dict[str, Any]:
    """AWS's example Job (examples/test-tas-job.yaml), its pod spec changed by ``pod_spec``."""
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "main",
                "image": "alpine",
                "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "4"}},
            }
        ],
        "restartPolicy": "Never",
    }
    spec.update(pod_spec)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": NS, "labels": {"kueue.x-k8s.io/queue-name": QUEUE}},
        "spec": {
            "parallelism": 2,
            "completions": 2,
            "suspend": True,
            "template": {"metadata": {"labels": {"job-name": "train"}}, "spec": spec},
        },
    }


def inspect(manifest: Any, rules: PodRules | None = None, **kw: Any):
    return inspect_manifest(manifest, team_namespace=NS, team_queue=QUEUE, rules=rules, **kw)


def refused(manifest: Any, rules: PodRules | None = None) -> ManifestProblem:
    with pytest.raises(ManifestProblem) as exc:
        inspect(manifest, rules)
    return exc.value


def main_container(m: dict[str, Any]) -> dict[str, Any]:
    return m["spec"]["template"]["spec"]["containers"][0]


def with_meta(**meta: Any) -> dict[str, Any]:
    m = job()
    m["metadata"].update(meta)
    return m


def with_template_meta(**meta: Any) -> dict[str, Any]:
    m = job()
    m["spec"]["template"]["metadata"].update(meta)
    return m


def with_job_spec(**spec: Any) -> dict[str, Any]:
    m = job()
    m["spec"].update(spec)
    return m


def with_env(*env: dict[str, Any], kind: str = "env") -> dict[str, Any]:
    m = job()
    main_container(m)[kind] = list(env)
    return m


def with_resources(**resources: Any) -> dict[str, Any]:
    m = job()
    main_container(m)["resources"] = resources
    return m


# (case, manifest, the field named, words of the reason)
REFUSED = [
    # the object's metadata
    (
        "owner references",
        with_meta(ownerReferences=[{"kind": "Job", "name": "x"}]),
        "manifest.metadata.ownerReferences",
        "garbage collection",
    ),
    (
        "finalizers",
        with_meta(finalizers=["example.com/keep"]),
        "manifest.metadata.finalizers",
        "after it is cancelled",
    ),
    ("a server-set field", with_meta(uid="1234"), "manifest.metadata.uid", "API server"),
    ("managed fields", with_meta(managedFields=[{}]), "manifest.metadata.managedFields", "API server"),
    ("generateName", with_meta(generateName="train-"), "manifest.metadata.generateName", "name the job"),
    (
        "another namespace",
        with_meta(namespace="hyperpod-ns-team-b"),
        "manifest.metadata.namespace",
        "team's namespace",
    ),
    (
        "another queue",
        with_meta(labels={"kueue.x-k8s.io/queue-name": "hyperpod-ns-team-b-localqueue"}),
        "manifest.metadata.labels.kueue.x-k8s.io/queue-name",
        "team's LocalQueue",
    ),
    (
        "a prebuilt Workload",
        with_meta(labels={"kueue.x-k8s.io/prebuilt-workload-name": "someone-elses"}),
        "manifest.metadata.labels.kueue.x-k8s.io/prebuilt-workload-name",
        "Kueue's",
    ),
    (
        "partial admission",
        with_meta(annotations={"kueue.x-k8s.io/job-min-parallelism": "1"}),
        "manifest.metadata.annotations.kueue.x-k8s.io/job-min-parallelism",
        "Kueue's",
    ),
    (
        "an elastic job",
        with_meta(annotations={"kueue.x-k8s.io/elastic-job": "true"}),
        "manifest.metadata.annotations.kueue.x-k8s.io/elastic-job",
        "Kueue's",
    ),
    (
        "another managed-by",
        with_meta(labels={"app.kubernetes.io/managed-by": "helm"}),
        "manifest.metadata.labels.app.kubernetes.io/managed-by",
        "Topogov's",
    ),
    (
        "Topogov's own key",
        with_meta(labels={"topogov.io/team": "team-b"}),
        "manifest.metadata.labels.topogov.io/team",
        "Topogov's own",
    ),
    # the pod template's metadata
    (
        "an unconstrained topology",
        with_template_meta(annotations={"kueue.x-k8s.io/podset-unconstrained-topology": "true"}),
        f"{T}.metadata.annotations.kueue.x-k8s.io/podset-unconstrained-topology",
        "Kueue's",
    ),
    (
        "a pod group of Kueue's",
        with_template_meta(labels={"job-name": "train", "kueue.x-k8s.io/pod-group-name": "g"}),
        f"{T}.metadata.labels.kueue.x-k8s.io/pod-group-name",
        "Kueue's",
    ),
    ("pod finalizers", with_template_meta(finalizers=["x/y"]), f"{T}.metadata.finalizers", "GPUs"),
    # the Job's spec
    (
        "another controller",
        with_job_spec(managedBy="example.com/other"),
        "manifest.spec.managedBy",
        "outside Kueue",
    ),
    ("a manual selector", with_job_spec(manualSelector=True), "manifest.spec.manualSelector", "adopt"),
    (
        "a selector",
        with_job_spec(selector={"matchLabels": {"a": "b"}}),
        "manifest.spec.selector",
        "Job controller",
    ),
    ("not suspended", with_job_spec(suspend=False), "manifest.spec.suspend", "Kueue starts"),
    ("no pods", with_job_spec(parallelism=0), "manifest.spec.parallelism", "from 1"),
    # scheduling outside Kueue's hands, or on unfit nodes
    ("a node", job(nodeName="i-0123"), f"{S}.nodeName", "bypassing"),
    (
        "a pod priority class",
        job(priorityClassName="system-node-critical"),
        f"{S}.priorityClassName",
        "WorkloadPriorityClass",
    ),
    ("scheduling gates", job(schedulingGates=[{"name": "mine"}]), f"{S}.schedulingGates", "Kueue's"),
    ("another scheduler", job(schedulerName="my-scheduler"), f"{S}.schedulerName", "default scheduler"),
    (
        "a hostname selector",
        job(nodeSelector={"kubernetes.io/hostname": "ip-10-0-0-1"}),
        f"{S}.nodeSelector.kubernetes.io/hostname",
        "named nodes",
    ),
    (
        "a hostname node affinity",
        job(
            affinity={
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1"]}
                                ]
                            }
                        ]
                    }
                }
            }
        ),
        f"{S}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].key",
        "named nodes",
    ),
    (
        "a node-name field affinity",
        job(
            affinity={
                "nodeAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "weight": 1,
                            "preference": {
                                "matchFields": [
                                    {"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}
                                ]
                            },
                        }
                    ]
                }
            }
        ),
        f"{S}.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference.matchFields[0].key",
        "named nodes",
    ),
    ("every taint", job(tolerations=[{"operator": "Exists"}]), f"{S}.tolerations[0]", "every taint"),
    (
        "an unreachable node",
        job(tolerations=[{"key": "node.kubernetes.io/unreachable", "operator": "Exists"}]),
        f"{S}.tolerations[0].key",
        "unfit",
    ),
    (
        "a cordoned node",
        job(tolerations=[{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}]),
        f"{S}.tolerations[0].key",
        "unfit",
    ),
    (
        "an unhealthy HyperPod node",
        job(
            tolerations=[
                {
                    "key": "sagemaker.amazonaws.com/node-health-status",
                    "operator": "Equal",
                    "value": "Unschedulable",
                }
            ]
        ),
        f"{S}.tolerations[0].key",
        "unfit",
    ),
    (
        "the control plane",
        job(tolerations=[{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"}]),
        f"{S}.tolerations[0].key",
        "unfit",
    ),
    # acting as someone else
    ("another service account", job(serviceAccountName="admin-sa"), f"{S}.serviceAccountName", "IAM role"),
    ("the deprecated alias", job(serviceAccount="admin-sa"), f"{S}.serviceAccount", "IAM role"),
    (
        "a secret volume",
        job(volumes=[{"name": "v", "secret": {"secretName": "db"}}]),
        f"{S}.volumes[0].secret.secretName",
        "pods.secrets",
    ),
    (
        "a projected secret",
        job(volumes=[{"name": "v", "projected": {"sources": [{"secret": {"name": "db"}}]}}]),
        f"{S}.volumes[0].projected.sources[0].secret.name",
        "pods.secrets",
    ),
    (
        "a CSI secret",
        job(volumes=[{"name": "v", "csi": {"driver": "x", "nodePublishSecretRef": {"name": "db"}}}]),
        f"{S}.volumes[0].csi.nodePublishSecretRef.name",
        "pods.secrets",
    ),
    (
        "a secret in env",
        with_env({"name": "PW", "valueFrom": {"secretKeyRef": {"name": "db", "key": "pw"}}}),
        f"{S}.containers[0].env[0].valueFrom.secretKeyRef.name",
        "pods.secrets",
    ),
    (
        "a secret in envFrom",
        with_env({"prefix": "DB_", "secretRef": {"name": "db"}}, kind="envFrom"),
        f"{S}.containers[0].envFrom[0].secretRef.name",
        "pods.secrets",
    ),
    ("a runtime class", job(runtimeClassName="kata"), f"{S}.runtimeClassName", "RuntimeClasses"),
    (
        "a long grace period",
        job(terminationGracePeriodSeconds=31536000),
        f"{S}.terminationGracePeriodSeconds",
        "GPUs",
    ),
    # devices uncharged
    (
        "every GPU",
        with_env({"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}),
        f"{S}.containers[0].env[0].name",
        "uncharged",
    ),
    (
        "driver features",
        with_env({"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "all"}),
        f"{S}.containers[0].env[0].name",
        "uncharged",
    ),
    (
        "Neuron devices",
        with_env({"name": "AWS_NEURON_VISIBLE_DEVICES", "value": "ALL"}),
        f"{S}.containers[0].env[0].name",
        "uncharged",
    ),
    (
        "envFrom without a prefix",
        with_env({"configMapRef": {"name": "cfg"}}, kind="envFrom"),
        f"{S}.containers[0].envFrom[0].prefix",
        "NVIDIA_VISIBLE_DEVICES",
    ),
    (
        "envFrom with a device prefix",
        with_env({"prefix": "NVIDIA_", "configMapRef": {"name": "c"}}, kind="envFrom"),
        f"{S}.containers[0].envFrom[0].prefix",
        "NVIDIA_",
    ),
    (
        "a MIG profile",
        with_resources(requests={"nvidia.com/mig-1g.10gb": "1"}),
        f"{S}.containers[0].resources.requests.nvidia.com/mig-1g.10gb",
        "uncharged",
    ),
    (
        "Neuron cores",
        with_resources(limits={"aws.amazon.com/neuroncore": "2"}),
        f"{S}.containers[0].resources.limits.aws.amazon.com/neuroncore",
        "uncharged",
    ),
    ("a resource claim", job(resourceClaims=[{"name": "gpu"}]), f"{S}.resourceClaims", "not charged"),
    ("a hand-written overhead", job(overhead={"cpu": "100"}), f"{S}.overhead", "RuntimeClass"),
    (
        "requests over limits",
        with_resources(requests={"cpu": "2"}, limits={"cpu": "1"}),
        f"{S}.containers[0].resources.requests.cpu",
        "limit",
    ),
    (
        "an ephemeral container",
        job(ephemeralContainers=[{"name": "d", "image": "x"}]),
        f"{S}.ephemeralContainers",
        "kubectl debug",
    ),
    ("no requests", with_resources(), f"{S}.containers[0].resources.requests", "charged on requests"),
    (
        "a pod-level device",
        job(resources={"requests": {"nvidia.com/gpu": "8"}}),
        f"{S}.resources.requests.nvidia.com/gpu",
        "pod-level",
    ),
]


@pytest.mark.parametrize(("manifest", "field", "why"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_what_would_reach_past_the_teams_lane_is_refused_naming_the_field(manifest, field, why):
    problem = refused(manifest)
    assert problem.field == field
    assert why in problem.message


def test_an_init_containers_device_variable_is_refused_too():
    m = job(
        initContainers=[
            {"name": "i", "image": "x", "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "0"}]}
        ]
    )
    assert refused(m).field == f"{S}.initContainers[0].env[0].name"


def test_every_problem_of_a_pod_template_is_listed_the_first_named():
    # Given a template with three problems of different kinds
    m = job(serviceAccountName="admin-sa", hostNetwork=True, nodeName="n1")
    # When it is checked
    problem = refused(m)
    # Then each is listed, the first (in the order of the checks) named
    fields = [f for f, _ in problem.problems]
    assert fields == [f"{S}.nodeName", f"{S}.serviceAccountName", f"{S}.hostNetwork"]
    assert problem.field == f"{S}.nodeName"


ACCEPTED = [
    ("AWS's example shape", job()),
    ("a listed service account", job(serviceAccountName="trainer")),
    (
        "the GPU taint",
        job(tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]),
    ),
    (
        "one pod per node",
        job(
            affinity={
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "topologyKey": "kubernetes.io/hostname",
                            "labelSelector": {"matchLabels": {"job-name": "train"}},
                        }
                    ]
                }
            }
        ),
    ),
    ("a listed secret", job(volumes=[{"name": "v", "secret": {"secretName": "hf-token"}}])),
    ("envFrom with a prefix", with_env({"prefix": "CFG_", "configMapRef": {"name": "cfg"}}, kind="envFrom")),
    ("a CUDA library variable", with_env({"name": "NVIDIA_TF32_OVERRIDE", "value": "0"})),
    ("a listed runtime class", job(runtimeClassName="nvidia")),
    ("a short grace period", job(terminationGracePeriodSeconds=60)),
    ("the default scheduler", job(schedulerName="default-scheduler")),
    (
        "huge pages and scratch",
        with_resources(requests={"cpu": "1", "hugepages-2Mi": "1Gi", "ephemeral-storage": "10Gi"}),
    ),
    (
        "the topology it asks",
        with_template_meta(
            annotations={"kueue.x-k8s.io/podset-required-topology": "topology.k8s.aws/network-node-layer-3"}
        ),
    ),
]

RULES = PodRules.model_validate(
    {"serviceAccounts": ["default", "trainer"], "secrets": ["hf-token"], "runtimeClasses": ["nvidia"]}
)


@pytest.mark.parametrize("manifest", [c[1] for c in ACCEPTED], ids=[c[0] for c in ACCEPTED])
def test_what_stays_in_the_teams_lane_is_accepted(manifest):
    inspect(manifest, RULES)


def test_a_privileged_team_may_use_host_namespaces_but_not_another_identity():
    # Given a team an admin let run privileged pods, with the reason written down
    rules = PodRules.model_validate({"security": "privileged", "privilegedReason": "node diagnostics team"})
    # Then Pod Security no longer refuses host access
    inspect(job(hostNetwork=True, hostPID=True), rules)
    # And the rules beyond Pod Security still hold
    assert (
        refused(job(hostNetwork=True, serviceAccountName="admin-sa"), rules).field
        == f"{S}.serviceAccountName"
    )


def test_pod_security_refusals_name_the_field_the_level_and_kubernetes_reason():
    problem = refused(job(hostPID=True))
    assert problem.field == f"{S}.hostPID"
    assert "Pod Security baseline" in problem.message and "host namespaces" in problem.message
    restricted = PodRules.model_validate({"security": "restricted"})
    fields = {f for f, _ in refused(job(), restricted).problems}
    assert f"{S}.containers[0].securityContext.allowPrivilegeEscalation" in fields


# --- what a job is charged ------------------------------------------------------------------------------


def test_sidecars_are_charged_as_kubernetes_and_kueue_count_them():
    # Given a 4-GPU container and two 4-GPU sidecars (restartable init containers): the escape of the
    # issue, charged 4 per pod where Kueue needs 12
    sidecar = {
        "name": "s",
        "image": "x",
        "restartPolicy": "Always",
        "resources": {"requests": {"nvidia.com/gpu": "4"}},
    }
    m = job(initContainers=[sidecar, {**sidecar, "name": "s2"}])
    shape = inspect(m)
    assert shape.per_pod.gpu == 12
    assert shape.total.gpu == 24  # two pods


def test_an_init_container_counts_when_it_asks_more_than_the_containers():
    m = job(initContainers=[{"name": "i", "image": "x", "resources": {"requests": {"nvidia.com/gpu": "8"}}}])
    assert inspect(m).per_pod.gpu == 8


def test_pod_level_requests_and_overhead_count():
    m = job(resources={"requests": {"cpu": "16"}})
    assert inspect(m).per_pod.cpu_m == 16_000
    defaults = summarize_limit_ranges([], runtime_overhead={"nvidia": {"cpu": "250m", "memory": "1Gi"}})
    shape = inspect(job(runtimeClassName="nvidia"), RULES, defaults=defaults)
    assert shape.per_pod == Resources(gpu=4, cpu_m=1250, memory=2**30)


def test_a_limit_range_default_is_charged_as_kueue_adds_it():
    # Given a namespace whose LimitRange gives every container 2Gi of memory by default
    limit_range = {"spec": {"limits": [{"type": "Container", "defaultRequest": {"memory": "2Gi"}}]}}
    shape = inspect(job(), defaults=summarize_limit_ranges([limit_range]))
    assert shape.per_pod.memory == 2 * 2**30


def test_a_job_is_counted_as_kueue_counts_its_pods():
    # Kueue's pod count is min(parallelism, completions) (pkg/controller/jobs/job/job_controller.go)
    m = with_job_spec(parallelism=8, completions=3)
    shape = inspect(m)
    assert shape.pods == 3
    assert [(ps.name, ps.count) for ps in shape.pod_sets] == [("main", 3)]


def test_a_kind_not_accepted_lists_the_accepted_ones():
    m = job()
    m["apiVersion"], m["kind"] = "kubeflow.org/v1", "MPIJob"
    problem = refused(m)
    assert problem.field == "manifest.kind"
    assert "batch/v1 Job" in problem.message


def test_malformed_shapes_are_refused_not_raised():
    for m in (
        None,
        [],
        {"apiVersion": "batch/v1", "kind": "Job"},
        job(containers="x"),
        job(containers=["x"]),
    ):
        with pytest.raises(ManifestProblem):
            inspect(m)


def test_the_input_is_never_changed():
    m = job(initContainers=[{"name": "i", "image": "x", "resources": {"limits": {"cpu": "1"}}}])
    before = copy.deepcopy(m)
    inspect(
        m,
        defaults=summarize_limit_ranges(
            [{"spec": {"limits": [{"type": "Container", "default": {"memory": "1Gi"}}]}}]
        ),
    )
    assert m == before
