"""AWS's own example of topology-aware scheduling on HyperPod: the API accepts it as is (the
walkthrough submits it; the tests check it)."""

AWS_EXAMPLE = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {
        "name": "test-tas-job",
        "namespace": "hyperpod-ns-team-a",
        "labels": {
            "kueue.x-k8s.io/queue-name": "hyperpod-ns-team-a-localqueue",
            "kueue.x-k8s.io/priority-class": "inference-priority",
        },
    },
    "spec": {
        "parallelism": 10,
        "completions": 10,
        "suspend": True,
        "template": {
            "metadata": {
                "labels": {"job-name": "test-tas-job"},
                "annotations": {
                    "kueue.x-k8s.io/podset-required-topology": "topology.k8s.aws/network-node-layer-3"
                },
            },
            "spec": {
                "containers": [
                    {
                        "name": "dummy-job",
                        "image": "public.ecr.aws/docker/library/alpine:latest",
                        "args": ["sleep", "3600s"],
                        "resources": {"requests": {"cpu": "1"}},
                    }
                ],
                "restartPolicy": "Never",
            },
        },
    },
}
