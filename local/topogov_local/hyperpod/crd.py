"""A stand-in for the ``hyperpodpytorchjobs.sagemaker.amazonaws.com`` CustomResourceDefinition, which the
HyperPod training operator (the closed EKS add-on ``amazon-sagemaker-hyperpod-training-operator``)
installs and which no public source ships.

Its identity is what ``hyp`` (aws/sagemaker-hyperpod-cli, released as sagemaker-hyperpod 3.12.0) sends and
checks: ``sagemaker/hyperpod/training/hyperpod_pytorch_job.py`` posts ``apiVersion:
sagemaker.amazonaws.com/v1``, ``kind: HyperPodPyTorchJob`` to ``…/namespaces/<ns>/hyperpodpytorchjobs``,
and ``cli/constants/pytorch_constants.py`` names the CRD it GETs first (a 404 stops every job command).
The API server compares a custom object's ``kind`` with the CRD's ``names.kind`` exactly, so the
capital T of ``PyTorch`` is the CRD's too.

The schema is structural, written from the public models of the object:

* ``spec``: the fields the stand-in operator reads, as the CLI's model types them
  (``training/config/hyperpod_pytorch_job_unified_config.py``: ``_HyperPodPytorchJob``, ``ReplicaSpec``,
  ``RunPolicy``; the parameters of ``hyperpod-pytorch-job-template`` 1.5.0, ``v1_1/schema.json``).
  The pod template's ``spec`` is a PodSpec, kept whole (``x-kubernetes-preserve-unknown-fields``: hyp
  sends resource quantities as JSON integers and strings alike), and so is anything else under
  ``spec`` that a newer CLI may send (elastic policy, log monitoring).
* ``status``: exactly the fields of ``HyperPodPytorchJobStatus`` of the same module, nothing kept
  beyond them. ``hyp list``, ``describe`` and ``delete`` parse the status with ``extra="forbid"``, so
  an unknown key would break them for the whole namespace; here the API server prunes it instead.

No field has a default: anything the API server added under ``replicaSpecs`` would break ``hyp list``
too (its nested models forbid unknown fields).
"""

from __future__ import annotations

from typing import Any

GROUP = "sagemaker.amazonaws.com"
VERSION = "v1"
KIND = "HyperPodPyTorchJob"
PLURAL = "hyperpodpytorchjobs"
NAME = f"{PLURAL}.{GROUP}"
API_VERSION = f"{GROUP}/{VERSION}"

_STR: dict[str, Any] = {"type": "string"}
_INT: dict[str, Any] = {"type": "integer"}
_STR_MAP: dict[str, Any] = {"type": "object", "additionalProperties": _STR}
_ANY_OBJECT: dict[str, Any] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


def _object(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        out["required"] = list(required)
    return out


def _list(items: dict[str, Any]) -> dict[str, Any]:
    return {"type": "array", "items": items}


_OBJECT_REFERENCE = _object(
    {k: _STR for k in ("apiVersion", "fieldPath", "kind", "name", "namespace", "resourceVersion", "uid")}
)
_CONDITION = _object(
    {k: _STR for k in ("type", "status", "lastTransitionTime", "lastProbeTime", "reason", "message")},
    required=("type", "status"),
)
_REPLICA_SPEC = _object(
    {
        "name": _STR,
        "replicas": _INT,
        "maxReplicas": _INT,
        "spares": _INT,
        "template": _object(
            {
                "metadata": _object(
                    {
                        "name": _STR,
                        "namespace": _STR,
                        "labels": _STR_MAP,
                        "annotations": _STR_MAP,
                        "finalizers": _list(_STR),
                    }
                ),
                "spec": _ANY_OBJECT,
            }
        ),
    },
    required=("name",),
)
_RUN_POLICY = {
    **_object(
        {
            "cleanPodPolicy": {"type": "string", "enum": ["All", "OnlyComplete", "None"]},
            "jobMaxRetryCount": _INT,
            "ttlSecondsAfterFinished": _INT,
            "activeDeadlineSeconds": _INT,
            "suspend": {"type": "boolean"},
        }
    ),
    "x-kubernetes-preserve-unknown-fields": True,  # restartPolicy, logMonitoringConfiguration, ...
}
SPEC = {
    **_object(
        {
            "nprocPerNode": _STR,
            "replicaSpecs": _list(_REPLICA_SPEC),
            "runPolicy": _RUN_POLICY,
            "elasticPolicy": _ANY_OBJECT,
        }
    ),
    "x-kubernetes-preserve-unknown-fields": True,
}
STATUS = _object(
    {
        "completionTime": _STR,
        "conditions": _list(_CONDITION),
        "jobPods": _list(_OBJECT_REFERENCE),
        "latestFaultyPodInstanceList": _object(
            {
                "restartType": _STR,
                "faultyInstanceIdList": _list(_STR),
                "faultyPodList": _list(_STR),
                "faultyRankList": _list(_STR),
            }
        ),
        "managerPods": _OBJECT_REFERENCE,
        "masterAddr": _STR,
        "masterPort": _STR,
        "restartCount": _INT,
        "restartStatus": _object(
            {"currentEvalPeriod": _INT, "fullJobRestartCount": _INT, "restartCount": _INT},
            required=("currentEvalPeriod", "fullJobRestartCount", "restartCount"),
        ),
        "startTime": _STR,
    }
)


def crd() -> dict[str, Any]:
    """The CustomResourceDefinition (apiextensions.k8s.io/v1): namespaced, ``v1`` served and stored,
    the status subresource (the operator writes status there; ``hyp`` never writes it)."""
    columns = [
        {"name": "Status", "type": "string", "jsonPath": ".status.conditions[-1:].type"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": NAME},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": KIND,
                "listKind": f"{KIND}List",
                "plural": PLURAL,
                "singular": KIND.lower(),
            },
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": columns,
                    "schema": {
                        "openAPIV3Schema": _object(
                            {
                                "apiVersion": _STR,
                                "kind": _STR,
                                "metadata": {"type": "object"},
                                "spec": SPEC,
                                "status": STATUS,
                            }
                        )
                    },
                }
            ],
        },
    }
