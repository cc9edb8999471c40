"""The platform engineer's path, rehearsed: ``cdk bootstrap`` and ``cdk deploy`` with the real CDK CLI
against the local AWS emulator, the deployed stack read back through each service's API, the
handlers under their deployed roles with IAM enforced (and Kubernetes RBAC, from the API server's
audit log), an upgrade, ``cdk destroy``. Nothing of the code under test is patched; the emulator
(moto + the project's extension) stands in for AWS."""

from __future__ import annotations

import io
import json
import os
import zipfile
from pathlib import Path
from typing import Any

import pytest

from tests.rehearse import scenario, variants
from tests.rehearse.conftest import CLUSTER, FULL, ROOT, Lifecycle
from topogov.adapters.tables import COUNTERS, IDEMPOTENCY, LEDGER
from topogov_local import fleet
from topogov_local.rehearse import (
    ACCOUNT,
    REGION,
    STACK,
    Cdk,
    Emulator,
    audit_events,
    deployed_routes,
    function_runtime,
    keep_assets,
    least_privilege,
    rbac_comparison,
    role_grants,
    seed_assets,
    stack_state,
)

CONTEXT = {"clusterName": CLUSTER, "account": ACCOUNT, "region": REGION}
FLEET = (
    "p5.48xlarge=64,p6-b200.48xlarge=4,c5.2xlarge=2"
    if FULL
    else "p5.48xlarge=8,p6-b200.48xlarge=2,c5.2xlarge=1"
)
GROUPS = {"reconcile": "topogov:reconciler", "api": "topogov:api"}

# Grants no handler code uses, and why they stay. Anything else unused fails the run.
JUSTIFIED: dict[tuple[str, str], str] = {
    # (role, action): reason
    ("reconcile", "logs:CreateLogStream"): "Lambda's runtime writes the function's logs with its role",
    ("reconcile", "logs:PutLogEvents"): "Lambda's runtime writes the function's logs with its role",
    ("api", "logs:CreateLogStream"): "Lambda's runtime writes the function's logs with its role",
    ("api", "logs:PutLogEvents"): "Lambda's runtime writes the function's logs with its role",
    ("reconcile", "xray:PutTraceSegments"): "Lambda's X-Ray daemon sends the traces with the role",
    ("reconcile", "xray:PutTelemetryRecords"): "Lambda's X-Ray daemon sends the traces with the role",
    ("api", "xray:PutTraceSegments"): "Lambda's X-Ray daemon sends the traces with the role",
    ("api", "xray:PutTelemetryRecords"): "Lambda's X-Ray daemon sends the traces with the role",
    ("api", "iam:GetRole"): (
        "the path of a calling role (a session's ARN lacks it), read when an assumed-role session calls "
        "(logic/identity.py); the rehearsal's callers are IAM users, tests/hardening/test_escape.py "
        "calls as sessions and observes the grant's bound"
    ),
    ("reconcile", "sqs:SendMessage"): (
        "the Lambda service sends an asynchronous event that failed every retry to the function's "
        "dead-letter queue with the function's role (Lambda Developer Guide, invocation-async: "
        "dead-letter queues); no handler code sends it"
    ),
}
# Kubernetes rules nothing here exercised, and why they stay (keys as the report names the rules).
_CLUSTER = "topogov-reconciler [cluster]"
_TEAMS = "topogov-reconciler-team [namespaces: hyperpod-ns-team-a, hyperpod-ns-team-b, hyperpod-ns-team-c]"
_PODS = "topogov-reconciler-pod-rules [namespaces: topogov-system]"
_API = "topogov-api [namespaces: hyperpod-ns-team-a, hyperpod-ns-team-b, hyperpod-ns-team-c]"
RBAC_JUSTIFIED: dict[str, str] = {
    f"{_CLUSTER}: create namespaces": (
        "the governor creates a team's namespace when it is missing (a Namespace CREATE of "
        "logic/governor); deploy/rbac.yaml, applied first here as in production, declares them all"
    ),
    **{
        f"{_CLUSTER}: get kueue.x-k8s.io/{kind}": (
            "read again by name after a 409 Conflict on the governor's PUT (another writer came "
            "first), and, for a ResourceFlavor, polled until Kueue lets a re-created flavor go "
            "(logic/governor/reconciler.py _apply_one, _detach, _recreate_flavor); neither happens here"
        )
        for kind in (
            "clusterqueues",
            "cohorts",
            "localqueues",
            "resourceflavors",
            "topologies",
            "workloadpriorityclasses",
        )
    },
    **{
        f"{_CLUSTER}: update kueue.x-k8s.io/{kind}": (
            "drift correction (PUT) of that kind: a hand edit of what Topogov renders (a Cohort's "
            "spec, a flavor's nodeLabels, a Topology's levels) or a rendering changed by a release; "
            "the rehearsal edits a ClusterQueue, a LocalQueue and a WorkloadPriorityClass"
        )
        for kind in ("cohorts", "resourceflavors", "topologies")
    },
    "topogov-api-quotas [cluster]: get kueue.x-k8s.io/clusterqueues": (
        "in HyperPod mode only, the API reads each team's quota in force from the task governance "
        "add-on's ClusterQueue by name (logic/api_service.py policy_now); this rehearsal's cluster is "
        "plain EKS (tests/e2e/test_hyperpod_local.py makes those reads as topogov:api)"
    ),
    "topogov-kueue-release [namespaces: kueue-system]: get apps/deployments": (
        "the Kueue release, read by name from its controller Deployment's image tag "
        "(adapters/kueue_api.py, kept 5 min): by the reconcile pass before the governor writes, and by "
        "the API when it estimates a pending job's start; a run with no such estimate leaves the API's "
        "grant unused (tests/e2e/test_kueue_v1beta2_only.py reads it as both)"
    ),
    f"{_CLUSTER}: patch namespaces": (
        "the Pod Security labels of a team namespace, by server-side apply, when they differ from the "
        "team's level (logic/governor/team_pods.py); deploy/rbac.yaml declares them right here"
    ),
    f"{_PODS}: create configmaps": (
        "a server-side apply that creates an object is authorized as create too (kube-apiserver "
        "endpoints/handlers/patch.go, createAuthorizerAttributes), which the audit log records as the "
        "patch it is: the team pod rules' first apply"
    ),
    f"{_PODS}: delete configmaps": (
        "the pod rules of a team no longer in teams.yaml (logic/governor/team_pods.py); no team is "
        "removed here"
    ),
    **{
        f"{_TEAMS}: {verb} {kind}": (
            "the ledger sync's reads, the fallback's patch and the cleanup's delete of the training "
            "kinds, as for batch/v1 Jobs (lambdas/topogov/domain/kinds.py); this rehearsal's cluster "
            "serves none of their CRDs (discovery finds none, adapters/kube_jobs.py served_kinds); "
            "tests/e2e/test_training_local.py and tests/e2e/test_hyperpod_local.py run them"
        )
        for verb in ("get", "patch", "delete")
        for kind in (
            "jobset.x-k8s.io/jobsets",
            "kubeflow.org/pytorchjobs",
            "sagemaker.amazonaws.com/hyperpodpytorchjobs",
        )
    },
    **{
        f"{_API}: {verb} {kind}": (
            "the API submits, reads, lists and cancels the training kinds as it does batch/v1 Jobs "
            "(lambdas/topogov/domain/kinds.py); this rehearsal's cluster serves none of their CRDs, so "
            "a high-level job renders as an Indexed Job; tests/e2e/test_training_local.py and "
            "tests/e2e/test_hyperpod_local.py use these rules"
        )
        for verb in ("create", "get", "list", "delete")
        for kind in (
            "jobset.x-k8s.io/jobsets",
            "kubeflow.org/pytorchjobs",
            "sagemaker.amazonaws.com/hyperpodpytorchjobs",
        )
    },
    f"{_TEAMS}: get kueue.x-k8s.io/workloads": (
        "the fallback reads the Workload again when Kueue refused its JSON patch (admitted "
        "meanwhile), to tell running from changed (adapters/kube_jobs.py _relax_workload)"
    ),
}


def _upgraded_policy_text() -> str:
    text = (ROOT / "teams.yaml").read_text()
    assert text.count("fairShareWeight: 2\n") == 1
    return text.replace("fairShareWeight: 2\n", "fairShareWeight: 3\n")


def _upgrade_policy(directory: Path) -> Path:
    """teams.yaml with team-c's fair-share weight changed: new function code, as a release ships.
    (Inside the repository, under the ignored .topogov/: the function asset is hashed by repo path.)"""
    path = ROOT / ".topogov" / "rehearse" / f"teams-upgrade-{directory.name}-{os.getpid()}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(_upgraded_policy_text())
    return path


@pytest.fixture(scope="module")
def life(tmp_path_factory: Any, rehearse_report: dict[str, Any]) -> Any:
    from topogov_local.cluster.controlplane import ControlPlane
    from topogov_local.eks_endpoint import EksEndpoint

    directory = tmp_path_factory.mktemp("rehearse")
    lc = Lifecycle(directory)
    emulator = Emulator(directory / "aws").start()
    cluster = endpoint = cdk = None
    try:
        cdk = Cdk(emulator.url, directory / "cdk.out", directory / "cdk.log")
        lc.cdk, lc.emulator = cdk, emulator  # type: ignore[attr-defined]
        cf = emulator.client("cloudformation")
        seed_assets(cdk.out)
        synth = cdk.synth(CONTEXT)  # the first synth overlaps the cluster's start
        cluster = ControlPlane(directory / "cluster", audit_log=directory / "audit.log").start()
        pki = cluster.pki
        assert pki is not None
        endpoint = EksEndpoint(
            CLUSTER,
            aws_url=emulator.url,
            apiserver_url=cluster.apiserver_url,
            ca=pki.ca,
            cert=pki.directory / "proxy.crt",
            key=pki.directory / "proxy.key",
            admin_token=pki.token("admin"),
        ).start()
        # The cluster exists before the stack (its access entries name it), its endpoint the EKS one.
        emulator.register_cluster(CLUSTER, endpoint.url, pki.ca.read_bytes())
        lc.run("synth", lambda: cdk.wait(synth))
        keep_assets(cdk.out)
        lc.add("bootstrap", cdk.bootstrap)
        lc.add("deploy", lambda: (cdk.deploy_assembly(), stack_state(cf))[1])
        lc.add("least privilege", lambda: _least_privilege(lc, emulator, cluster, directory, rehearse_report))
        lc.add("upgrade", lambda: _upgrade(lc, emulator, cdk, directory, rehearse_report))
        lc.add(
            "layer-only upgrade", lambda: _layer_only_upgrade(lc, emulator, cdk, directory, rehearse_report)
        )
        lc.add("destroy", lambda: _destroy(lc, emulator, cdk, rehearse_report))
        yield lc
        if FULL:
            lc.finish()
        rehearse_report.update({"mode": lc.report["mode"], "phases": lc.report["phases"]})
        rehearse_report["cdk_seconds"] = {
            f"{r.args[0]} #{i}": round(r.seconds, 1) for i, r in enumerate(cdk.runs, 1)
        }
    finally:  # whatever failed, nothing started here outlives the module: a CDK run under way neither
        if cdk is not None:
            cdk.cancel()
        if endpoint is not None:
            endpoint.stop()
        if cluster is not None:
            cluster.stop()
        emulator.stop()


# --- phases ----------------------------------------------------------------------------------------
def _least_privilege(
    lc: Lifecycle, emulator: Emulator, cluster: Any, directory: Path, report: dict[str, Any]
) -> Any:
    state = lc.phases["deploy"].get()
    launched = fleet.launch(emulator.client("ec2"), fleet.parse_fleet(FLEET))
    fleet.register_nodes(cluster.admin(), launched, simulated=True)
    functions = {
        "reconcile": function_runtime(
            emulator, state, state.logical("AWS::Lambda::Function", "Reconciler"), directory / "functions"
        ),
        "api": function_runtime(
            emulator, state, state.logical("AWS::Lambda::Function", "Api"), directory / "functions"
        ),
    }
    rest_api = state.physical("AWS::ApiGateway::RestApi")
    harness = scenario.Harness(
        reconcile=functions["reconcile"],
        api=functions["api"],
        aws_url=emulator.url,
        routes=deployed_routes(emulator.client("apigateway"), rest_api),
        kube=cluster.admin(),
    )
    probes: dict[str, str] = {}
    emulator.clear_decisions()
    emulator.enforce_iam(True)
    try:
        probes = _probes(emulator, functions, state)
        emulator.clear_decisions()
        seen = scenario.run(harness, launched[0]["InstanceId"], rounds=3 if FULL else 1)
        decisions = emulator.decisions()
    finally:
        emulator.enforce_iam(False)
    iam = emulator.client("iam")
    roles = {}
    for key, fn in functions.items():
        role = fn.role_arn.rsplit("/", 1)[-1]
        roles[key] = least_privilege(role_grants(iam, role), decisions, fn.principal, role)
    rbac = {
        key: rbac_comparison(group, audit_events(directory / "audit.log", group))
        for key, group in GROUPS.items()
    }
    report["roles"] = []
    for key, r in roles.items():
        doc = r.to_json()
        for u in doc["unused"]:
            u["why"] = JUSTIFIED.get((key, u["action"]), "-> remove")
        report["roles"].append(doc)
    report["rbac"] = [
        {**doc, "why": {u: RBAC_JUSTIFIED.get(u, "-> remove") for u in doc["unused"]}}
        for doc in rbac.values()
    ]
    report["scenario"] = harness.log
    return {
        "seen": seen,
        "roles": roles,
        "rbac": rbac,
        "probes": probes,
        "decisions": decisions,
        "functions": functions,
        "instances": launched,
    }


def _probes(emulator: Emulator, functions: dict[str, Any], state: Any) -> dict[str, str]:
    """Calls outside each role's grants, made with its credentials: each must be refused."""
    from botocore.exceptions import ClientError

    api, rec = functions["api"].credentials, functions["reconcile"].credentials
    bucket = state.outputs["SnapshotBucket"]
    tables = state.of_type("AWS::DynamoDB::Table")
    idem = next(p for k, p in tables.items() if "Idempotency" in k)
    out: dict[str, str] = {}
    attempts = {
        "api puts the snapshot": lambda: emulator.client("s3", api).put_object(
            Bucket=bucket, Key="topology/snapshot.json", Body=b"{}"
        ),
        "api reads another key": lambda: emulator.client("s3", api).get_object(
            Bucket=bucket, Key="other.json"
        ),
        "api asks EC2": lambda: emulator.client("ec2", api).describe_instance_topology(),
        "reconcile reads the idempotency table": lambda: emulator.client("dynamodb", rec).get_item(
            TableName=idem, Key={"id": {"S": "x"}}
        ),
        "reconcile describes another cluster": lambda: emulator.client("eks", rec).describe_cluster(
            name="other"
        ),
    }
    for what, call in attempts.items():
        try:
            call()
            out[what] = "allowed"
        except ClientError as exc:
            out[what] = exc.response["Error"]["Code"]
    return out


def _upgrade(lc: Lifecycle, emulator: Emulator, cdk: Cdk, directory: Path, report: dict[str, Any]) -> Any:
    cf, ddb, s3 = (emulator.client(s) for s in ("cloudformation", "dynamodb", "s3"))
    before = stack_state(cf)
    tables = before.of_type("AWS::DynamoDB::Table")
    items_before = {k: ddb.scan(TableName=p, Select="COUNT")["Count"] for k, p in tables.items()}
    bucket = before.outputs["SnapshotBucket"]
    snapshot_before = s3.head_object(Bucket=bucket, Key="topology/snapshot.json")["ETag"]
    context = {
        **CONTEXT,
        "reconcileSchedule": "rate(10 minutes)",
        "logRetentionDays": "90",
        "apiRateLimit": "40",
        "policyFile": str(_upgrade_policy(directory)),
    }
    seed_assets(cdk.out)
    try:
        cdk.deploy(context)
    finally:
        Path(context["policyFile"]).unlink(missing_ok=True)
    after = stack_state(cf)
    update = emulator.cloudformation_updates()[STACK]
    sets = cf.list_change_sets(StackName=STACK)["Summaries"]
    last = sorted(sets, key=lambda s: s["CreationTime"])[-1]
    changes = cf.describe_change_set(StackName=STACK, ChangeSetName=last["ChangeSetName"])["Changes"]
    items_after = {
        k: ddb.scan(TableName=p, Select="COUNT")["Count"]
        for k, p in after.of_type("AWS::DynamoDB::Table").items()
    }
    snapshot_after = s3.head_object(Bucket=after.outputs["SnapshotBucket"], Key="topology/snapshot.json")[
        "ETag"
    ]
    report["upgrade"] = {**update, "changes": len(changes)}
    return {
        "before": before,
        "after": after,
        "update": update,
        "changes": changes,
        "items": (items_before, items_after),
        "snapshot": (snapshot_before, snapshot_after),
        "context": context,
    }


def _layer_only_upgrade(
    lc: Lifecycle, emulator: Emulator, cdk: Cdk, directory: Path, report: dict[str, Any]
) -> Any:
    """``cdk deploy`` of the upgraded app with only ``requirements/runtime.txt`` changed (a copy of the
    app: :func:`tests.rehearse.variants.app_copy`), the upgrade's context and policy otherwise."""
    up = lc.phases["upgrade"].get()
    cf, fns = emulator.client("cloudformation"), emulator.client("lambda")
    before = stack_state(cf)
    api = before.resources[before.logical("AWS::Lambda::Function", "Api")][1]
    live_before = variants.live_version(fns, api)
    app, policy = variants.app_copy(directory, Path(up["context"]["policyFile"]), _upgraded_policy_text())
    context = {**up["context"], "policyFile": str(policy)}
    seed_assets(cdk.out)
    cdk.run(
        "deploy", STACK, "--app", variants.app_command(app), "--output", str(cdk.out),
        "--require-approval", "never", *Cdk.context_args(context),
    )  # fmt: skip
    keep_assets(cdk.out)
    after = stack_state(cf)
    update = emulator.cloudformation_updates()[STACK]
    report["layer_only_upgrade"] = {
        "replaced": sorted(update["replaced"]),
        "added": sorted(update["added"]),
        "live": {"before": live_before[0], "after": variants.live_version(fns, api)[0]},
    }
    return {
        "before": before,
        "after": after,
        "update": update,
        "api": api,
        "live": (live_before, variants.live_version(fns, api)),
    }


def _destroy(lc: Lifecycle, emulator: Emulator, cdk: Cdk, report: dict[str, Any]) -> Any:
    from topogov_local.rehearse import resource_exists

    state = lc.phases["layer-only upgrade"].get()["after"]
    cdk.destroy()
    cf = emulator.client("cloudformation")
    stacks = [s for s in cf.list_stacks()["StackSummaries"] if s["StackName"] == STACK]
    left = {k: resource_exists(emulator, state, k) for k in state.resources}
    report["destroy"] = {"retained": sorted(f"{state.resources[k][0]} {k}" for k, v in left.items() if v)}
    return {"state": state, "stacks": stacks, "left": left}


# --- deploy ----------------------------------------------------------------------------------------
def test_the_cli_bootstraps_and_deploys_every_resource_of_the_template(life: Lifecycle) -> None:
    life.phases["bootstrap"].get()
    state = life.phases["deploy"].get()
    assert state.status == "CREATE_COMPLETE"
    assert set(state.resources) == set(state.template["Resources"])  # nothing skipped as unsupported
    assert {k for k, (_, p) in state.resources.items() if not p} <= {
        k
        for k, r in state.template["Resources"].items()
        if r["Type"] in ("AWS::Lambda::Permission", "AWS::ApiGateway::Method")
    }
    assert {"ApiUrl", "SnapshotBucket", "ReconcilerRoleArn", "ApiRoleArn"} <= set(state.outputs)
    assert state.outputs["ApiUrl"].startswith(
        f"https://{state.physical('AWS::ApiGateway::RestApi')}.execute-api."
    )


def test_tables_have_their_keys_ttl_encryption_and_recovery(life: Lifecycle) -> None:
    state = life.phases["deploy"].get()
    ddb = life.emulator.client("dynamodb")  # type: ignore[attr-defined]
    tables = state.of_type("AWS::DynamoDB::Table")
    assert len(tables) == 3
    for logical, keys in (("Ledger", LEDGER), ("Counters", COUNTERS), ("Idempotency", IDEMPOTENCY)):
        (name,) = [p for k, p in tables.items() if k.startswith(f"Storage{logical}")]
        table = ddb.describe_table(TableName=name)["Table"]
        assert table["KeySchema"] == keys.key_schema(), logical
        assert table["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
        assert table["SSEDescription"]["Status"] == "ENABLED" and table["SSEDescription"]["SSEType"] == "KMS"
        backups = ddb.describe_continuous_backups(TableName=name)["ContinuousBackupsDescription"]
        assert backups["PointInTimeRecoveryDescription"]["PointInTimeRecoveryStatus"] == "ENABLED"
        ttl = ddb.describe_time_to_live(TableName=name)["TimeToLiveDescription"]
        if keys.ttl:
            assert ttl == {"TimeToLiveStatus": "ENABLED", "AttributeName": keys.ttl}
        else:
            assert ttl["TimeToLiveStatus"] == "DISABLED"


def test_the_bucket_is_private_encrypted_versioned_and_ssl_only(life: Lifecycle) -> None:
    state = life.phases["deploy"].get()
    s3 = life.emulator.client("s3")  # type: ignore[attr-defined]
    bucket = state.outputs["SnapshotBucket"]
    assert state.physical("AWS::S3::Bucket") == bucket
    assert set(s3.get_public_access_block(Bucket=bucket)["PublicAccessBlockConfiguration"].values()) == {True}
    assert s3.get_bucket_versioning(Bucket=bucket)["Status"] == "Enabled"
    (rule,) = s3.get_bucket_encryption(Bucket=bucket)["ServerSideEncryptionConfiguration"]["Rules"]
    assert rule["ApplyServerSideEncryptionByDefault"]["SSEAlgorithm"] == "AES256"
    (lifecycle,) = s3.get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"]
    assert lifecycle["NoncurrentVersionExpiration"]["NoncurrentDays"] == 7
    assert lifecycle["AbortIncompleteMultipartUpload"]["DaysAfterInitiation"] == 1
    policy = json.loads(s3.get_bucket_policy(Bucket=bucket)["Policy"])
    (deny,) = [st for st in policy["Statement"] if st["Effect"] == "Deny"]
    assert deny["Action"] == "s3:*" and deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    assert sorted(deny["Resource"]) == [f"arn:aws:s3:::{bucket}", f"arn:aws:s3:::{bucket}/*"]


def _tables(state: Any) -> dict[str, str]:
    """Physical table names by their construct: Ledger, Counters, Idempotency."""
    out = {}
    for logical, physical in state.of_type("AWS::DynamoDB::Table").items():
        (name,) = [n for n in ("Ledger", "Counters", "Idempotency") if logical.startswith(f"Storage{n}")]
        out[name] = physical
    return out


def _function(life: Lifecycle, prefix: str) -> dict[str, Any]:
    state = life.phases["deploy"].get()
    name = state.resources[state.logical("AWS::Lambda::Function", prefix)][1]
    return life.emulator.client("lambda").get_function(FunctionName=name)  # type: ignore[attr-defined, no-any-return]


def _code_package(life: Lifecycle, state: Any, logical: str) -> zipfile.ZipFile:
    code = state.template["Resources"][logical]["Properties"]["Code"]
    bucket = f"cdk-hnb659fds-assets-{ACCOUNT}-{REGION}"
    body = life.emulator.client("s3").get_object(Bucket=bucket, Key=code["S3Key"])["Body"].read()  # type: ignore[attr-defined]
    return zipfile.ZipFile(io.BytesIO(body))


def test_each_function_has_its_runtime_handler_layer_and_environment(life: Lifecycle) -> None:
    from topogov.settings import ApiSettings, ReconcileSettings

    state = life.phases["deploy"].get()
    layer = state.physical("AWS::Lambda::LayerVersion")
    tables = _tables(state)
    for prefix, handler, settings_cls in (
        ("Reconciler", "topogov.handlers.reconcile.handler", ReconcileSettings),
        ("Api", "topogov.handlers.api.handler", ApiSettings),
    ):
        fn = _function(life, prefix)
        config = fn["Configuration"]
        assert config["Runtime"] == "python3.12" and config["Architectures"] == ["x86_64"]
        assert config["Handler"] == handler
        assert [x["Arn"] for x in config["Layers"]] == [layer]
        assert config["TracingConfig"] == {"Mode": "Active"}
        env = config["Environment"]["Variables"]
        settings = settings_cls.from_env(env)  # the function would start with it
        assert settings.cluster_name == CLUSTER and settings.kubeconfig is None
        assert settings.snapshot_bucket == state.outputs["SnapshotBucket"]
        assert settings.ledger_table == tables["Ledger"] and settings.counters_table == tables["Counters"]
        assert settings.policy_file == "/var/task/policy/teams.yaml"
        package = _code_package(life, state, state.logical("AWS::Lambda::Function", prefix))
        assert package.read("policy/teams.yaml") == (ROOT / "teams.yaml").read_bytes()
        assert "topogov/handlers/" + handler.split(".")[2] + ".py" in package.namelist()
    reconcile = _function(life, "Reconciler")
    # one pass at a time by a lease, not reserved concurrency (which a small account cannot grant)
    assert reconcile["Configuration"]["Timeout"] == 900 and "Concurrency" not in reconcile
    queue = state.physical("AWS::SQS::Queue")
    assert reconcile["Configuration"]["DeadLetterConfig"]["TargetArn"].endswith(
        ":" + queue.rsplit("/", 1)[-1]
    )
    lam = life.emulator.client("lambda")  # type: ignore[attr-defined]
    invoke = lam.get_function_event_invoke_config(FunctionName=reconcile["Configuration"]["FunctionName"])
    assert invoke["MaximumRetryAttempts"] == 2 and invoke["MaximumEventAgeInSeconds"] == 3600
    api = _function(life, "Api")
    assert api["Configuration"]["Timeout"] == 29
    assert api["Concurrency"]["ReservedConcurrentExecutions"] == 25  # apiReservedConcurrency's default
    assert (
        ApiSettings.from_env(api["Configuration"]["Environment"]["Variables"]).idempotency_table
        == tables["Idempotency"]
    )


def test_every_rest_api_method_requires_iam_and_reaches_the_api_function(life: Lifecycle) -> None:
    from infra.config import DeployConfig
    from topogov.handlers.api import routes

    state = life.phases["deploy"].get()
    apigw = life.emulator.client("apigateway")  # type: ignore[attr-defined]
    rest_api = state.physical("AWS::ApiGateway::RestApi")
    deployed = deployed_routes(apigw, rest_api)
    assert deployed == {path: sorted(methods) for path, methods in routes().items()}
    validator = state.physical("AWS::ApiGateway::RequestValidator")
    api_function = state.resources[state.logical("AWS::Lambda::Function", "Api")][1]
    for item in apigw.get_resources(restApiId=rest_api, embed=["methods"], limit=500)["items"]:
        for method, m in (item.get("resourceMethods") or {}).items():
            assert m["authorizationType"] == "AWS_IAM", (item["path"], method)
            assert m["requestValidatorId"] == validator
            assert m["methodIntegration"]["type"] == "AWS_PROXY"
            assert f":function:{api_function}" in m["methodIntegration"]["uri"]
            for p in ("team", "name"):
                if "{" + p + "}" in item["path"]:
                    assert m["requestParameters"][f"method.request.path.{p}"] is True
    v = apigw.get_request_validator(restApiId=rest_api, requestValidatorId=validator)
    assert v["validateRequestBody"] and v["validateRequestParameters"]
    stage = apigw.get_stage(restApiId=rest_api, stageName="prod")
    defaults = DeployConfig.model_fields
    assert stage["tracingEnabled"] is True
    assert stage["methodSettings"]["*/*"]["throttlingRateLimit"] == defaults["api_rate_limit"].default
    assert stage["methodSettings"]["*/*"]["throttlingBurstLimit"] == defaults["api_burst_limit"].default
    submit = stage["methodSettings"]["~1v1~1jobs/POST"]
    assert submit["throttlingRateLimit"] == defaults["submit_rate_limit"].default
    access_logs = state.resources[state.logical("AWS::Logs::LogGroup", "ApiAccessLogs")][1]
    assert stage["accessLogSettings"]["destinationArn"].endswith(f":log-group:{access_logs}")


def test_the_rules_target_the_reconcile_function_with_retries_and_dead_letters(life: Lifecycle) -> None:
    state = life.phases["deploy"].get()
    events, lam = (life.emulator.client(s) for s in ("events", "lambda"))  # type: ignore[attr-defined]
    fn = _function(life, "Reconciler")["Configuration"]
    queue_name = state.physical("AWS::SQS::Queue").rsplit("/", 1)[-1]
    rules = {k: p for k, p in state.of_type("AWS::Events::Rule").items()}
    assert len(rules) == 2
    policy = json.loads(lam.get_policy(FunctionName=fn["FunctionName"])["Policy"])
    for logical, name in rules.items():
        rule = events.describe_rule(Name=name)
        if logical.startswith("ReconcilerSchedule"):
            assert rule["ScheduleExpression"] == "rate(5 minutes)"
        else:
            assert json.loads(rule["EventPattern"]) == {
                "source": ["aws.ec2"],
                "detail-type": ["EC2 Instance State-change Notification"],
                "detail": {"state": ["running"]},
            }
        (target,) = events.list_targets_by_rule(Rule=name)["Targets"]
        assert target["Arn"] == fn["FunctionArn"]
        assert target["DeadLetterConfig"]["Arn"].endswith(":" + queue_name)
        assert target["RetryPolicy"]["MaximumRetryAttempts"] == 2
        assert any(
            st["Principal"] == {"Service": "events.amazonaws.com"}
            and st["Condition"]["ArnLike"]["AWS:SourceArn"] == rule["Arn"]
            for st in policy["Statement"]
        ), f"no permission lets {rule['Arn']} invoke the function"


def _statements(life: Lifecycle, role_arn: str) -> dict[str, dict[str, Any]]:
    iam = life.emulator.client("iam")  # type: ignore[attr-defined]
    role = role_arn.rsplit("/", 1)[-1]
    out = {}
    for name in iam.list_role_policies(RoleName=role)["PolicyNames"]:
        for st in iam.get_role_policy(RoleName=role, PolicyName=name)["PolicyDocument"]["Statement"]:
            out[st.get("Sid") or json.dumps(st["Action"])] = st
    return out


def test_each_role_is_lambdas_and_grants_the_deployed_resources_only(life: Lifecycle) -> None:
    state = life.phases["deploy"].get()
    iam = life.emulator.client("iam")  # type: ignore[attr-defined]
    bucket = state.outputs["SnapshotBucket"]
    table = {k: f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{p}" for k, p in _tables(state).items()}
    cluster = f"arn:aws:eks:{REGION}:{ACCOUNT}:cluster/{CLUSTER}"
    for output in ("ReconcilerRoleArn", "ApiRoleArn"):
        role = iam.get_role(RoleName=state.outputs[output].rsplit("/", 1)[-1])["Role"]
        assert role["AssumeRolePolicyDocument"]["Statement"] == [
            {"Action": "sts:AssumeRole", "Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}}
        ]
        assert iam.list_attached_role_policies(RoleName=role["RoleName"])["AttachedPolicies"] == []
        for st in _statements(life, role["Arn"]).values():
            assert st["Effect"] == "Allow" and "Condition" not in st
            actions = st["Action"] if isinstance(st["Action"], list) else [st["Action"]]
            if st["Resource"] == "*":  # README: only DescribeInstanceTopology and X-Ray
                assert set(actions) <= {
                    "ec2:DescribeInstanceTopology",
                    "xray:PutTraceSegments",
                    "xray:PutTelemetryRecords",
                }
    rec = _statements(life, state.outputs["ReconcilerRoleArn"])
    assert rec["TopologySnapshot"]["Resource"] == f"arn:aws:s3:::{bucket}/topology/snapshot.json"
    assert rec["TellAMissingSnapshot"]["Resource"] == f"arn:aws:s3:::{bucket}"
    assert rec["LedgerSync"]["Resource"] == table["Ledger"]
    assert rec["CountersSync"]["Resource"] == table["Counters"]
    assert rec["DescribeTheCluster"]["Resource"] == cluster
    api = _statements(life, state.outputs["ApiRoleArn"])
    assert api["ReadTopologySnapshot"]["Resource"] == f"arn:aws:s3:::{bucket}/topology/snapshot.json"
    assert api["Ledger"]["Resource"] == table["Ledger"]
    assert api["Counters"]["Resource"] == table["Counters"]
    assert api["Idempotency"]["Resource"] == table["Idempotency"]
    assert api["DescribeTheCluster"]["Resource"] == cluster


def test_the_access_entries_map_the_roles_to_their_groups(life: Lifecycle) -> None:
    state = life.phases["deploy"].get()
    entries = life.emulator.control("GET", f"/_topogov/eks/clusters/{CLUSTER}/access-entries")[
        "accessEntries"
    ]  # type: ignore[attr-defined]
    assert {e["principalArn"]: e["kubernetesGroups"] for e in entries} == {
        state.outputs["ReconcilerRoleArn"]: ["topogov:reconciler"],
        state.outputs["ApiRoleArn"]: ["topogov:api"],
    }
    assert {e["type"] for e in entries} == {"STANDARD"}


def test_alarms_publish_to_the_encrypted_topic_cloudwatch_alone_may_use(life: Lifecycle) -> None:
    state = life.phases["deploy"].get()
    cw, sns = (life.emulator.client(s) for s in ("cloudwatch", "sns"))  # type: ignore[attr-defined]
    topic = state.physical("AWS::SNS::Topic")
    names = set(state.of_type("AWS::CloudWatch::Alarm").values())
    alarms = [a for a in cw.describe_alarms(MaxRecords=100)["MetricAlarms"] if a["AlarmName"] in names]
    assert len(alarms) == len(names) >= 12
    assert all(a["AlarmActions"] == [topic] for a in alarms)
    attrs = sns.get_topic_attributes(TopicArn=topic)["Attributes"]
    statements = json.loads(attrs["Policy"])["Statement"]
    (st,) = [s for s in statements if s["Effect"] == "Allow"]
    assert st["Principal"] == {"Service": "cloudwatch.amazonaws.com"} and st["Action"] == "sns:Publish"
    assert st["Condition"]["StringEquals"] == {"aws:SourceAccount": ACCOUNT}
    (deny,) = [s for s in statements if s["Effect"] == "Deny"]  # enforce_ssl: no publish over plain HTTP
    assert deny["Action"] == "sns:Publish" and deny["Resource"] == topic
    assert deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}


# --- least privilege --------------------------------------------------------------------------------------
def test_the_handlers_did_what_the_tests_do_under_their_deployed_roles(life: Lifecycle) -> None:
    seen = life.phases["least privilege"].get()["seen"]
    assert seen["topology_before"] == 503  # no snapshot yet: S3 said NoSuchKey (s3:ListBucket), not 403
    assert seen["first_pass"]["patched"] > 0 and seen["first_pass"]["complete"]
    assert seen["steady_pass"]["patched"] == 0 and seen["steady_pass"]["ec2_calls"] == 0
    assert seen["targeted_pass"]["ec2_calls"] == 1
    assert {seen[k] for k in ("teams", "team", "topology", "openapi", "dry_run", "jobs", "job")} == {200}
    assert seen["undeployed_method"] == seen["undeployed_path"] == 403  # the gateway serves the RestApi's
    assert seen["submit"] == seen["submit_replayed"] == seen["submit_held"] == seen["submit_to_cancel"] == 201
    assert seen["cancel"] == 200 and seen["submit_conflict"] == seen["submit_conflict_again"] == 409
    ledger = seen["sync_pass"]["ledger"]
    assert ledger["released_finished"] >= 1
    assert "team-b/waits" in ledger["fallbacks"], (seen["sync_pass"], seen["waits"])
    assert ledger["orphans_deleted"] == 1 and seen["orphan_left"] is False
    assert seen["fallback"] is not None and seen["in_flight_a"] == 0
    assert len(seen["edited"]) == 3 and seen["strays_left"] == []  # drift corrected, strays deleted
    assert seen["busy_stray"] == "HoldAndDrain"


def test_no_call_of_either_handler_was_denied(life: Lifecycle) -> None:
    roles = life.phases["least privilege"].get()["roles"]
    for key, report in roles.items():
        assert report.calls, f"{key}: no AWS call was recorded for {report.principal}"
        assert report.denied == [], (key, report.denied)


def test_calls_outside_the_grants_are_denied_by_resource(life: Lifecycle) -> None:
    probes = life.phases["least privilege"].get()["probes"]
    assert probes == {
        "api puts the snapshot": "AccessDenied",
        "api reads another key": "AccessDenied",
        "api asks EC2": "AccessDenied",
        "reconcile reads the idempotency table": "AccessDeniedException",
        "reconcile describes another cluster": "AccessDeniedException",
    }


def test_resource_scoped_calls_were_judged_against_the_real_arns(life: Lifecycle) -> None:
    result = life.phases["least privilege"].get()
    for report in result["roles"].values():
        for action, resource in report.calls:
            if action.split(":")[0] in ("dynamodb", "s3", "eks"):
                assert resource.startswith(f"arn:aws:{action.split(':')[0]}:"), (action, resource)
                assert "*" not in resource, (action, resource)


def test_every_grant_is_used_or_justified(life: Lifecycle) -> None:
    roles = life.phases["least privilege"].get()["roles"]
    unexplained = {
        key: [(g.sid, g.action, g.resource) for g in r.unused if (key, g.action) not in JUSTIFIED]
        for key, r in roles.items()
    }
    assert unexplained == {"reconcile": [], "api": []}


def test_kubernetes_requests_were_all_allowed_and_every_rule_is_used_or_justified(life: Lifecycle) -> None:
    rbac = life.phases["least privilege"].get()["rbac"]
    for key, doc in rbac.items():
        assert doc["requests"], f"{key}: the audit log has no request of {doc['group']}"
        assert doc["forbidden"] == [] and doc["uncovered"] == {}, (key, doc["forbidden"], doc["uncovered"])
        assert [u for u in doc["unused"] if u not in RBAC_JUSTIFIED] == [], (key, doc["unused"])


# --- upgrade -------------------------------------------------------------------------------------------
def test_the_upgrade_replaces_no_table_or_bucket_and_keeps_their_data(life: Lifecycle) -> None:
    up = life.phases["upgrade"].get()
    replaced = up["update"]["replaced"]
    assert not {n for n, r in replaced.items() if r["type"] in ("AWS::DynamoDB::Table", "AWS::S3::Bucket")}
    for kind in ("AWS::DynamoDB::Table", "AWS::S3::Bucket"):
        assert up["before"].of_type(kind) == up["after"].of_type(kind)
    before, after = up["items"]
    assert after == before and sum(before.values()) > 0
    assert up["snapshot"][0] == up["snapshot"][1]


def test_the_upgrade_keeps_the_physical_id_of_everything_it_does_not_replace(life: Lifecycle) -> None:
    up = life.phases["upgrade"].get()
    replaced = set(up["update"]["replaced"])
    for logical, (kind, physical) in up["before"].resources.items():
        if logical in up["after"].resources and logical not in replaced:
            assert up["after"].resources[logical][1] == physical, (logical, kind)
    for logical in replaced:
        assert up["after"].resources[logical][1] != up["before"].resources[logical][1], logical


def test_the_change_set_says_what_the_update_then_did(life: Lifecycle) -> None:
    up = life.phases["upgrade"].get()
    said = {
        c["ResourceChange"]["LogicalResourceId"]: c["ResourceChange"].get("Replacement")
        for c in up["changes"]
        if c["ResourceChange"]["Action"] == "Modify"
    }
    assert {k for k, v in said.items() if v in ("True", "Conditional")} == set(up["update"]["replaced"])
    assert set(said) - set(up["update"]["replaced"]) == set(up["update"]["updated_in_place"])


def test_the_upgrade_applied_the_new_settings_and_code(life: Lifecycle) -> None:
    up = life.phases["upgrade"].get()
    after = up["after"]
    events, logs = (life.emulator.client(s) for s in ("events", "logs"))  # type: ignore[attr-defined]
    schedule = after.resources[after.logical("AWS::Events::Rule", "ReconcilerSchedule")][1]
    assert events.describe_rule(Name=schedule)["ScheduleExpression"] == "rate(10 minutes)"
    for logical, name in after.of_type("AWS::Logs::LogGroup").items():
        (group,) = logs.describe_log_groups(logGroupNamePrefix=name)["logGroups"]
        assert group["retentionInDays"] == 90, logical
    for prefix in ("Reconciler", "Api"):
        package = _code_package(life, after, after.logical("AWS::Lambda::Function", prefix))
        assert b"fairShareWeight: 3\n" in package.read("policy/teams.yaml")
    stage = life.emulator.client("apigateway").get_stage(  # type: ignore[attr-defined]
        restApiId=after.physical("AWS::ApiGateway::RestApi"), stageName="prod"
    )
    assert stage["methodSettings"]["*/*"]["throttlingRateLimit"] == 40


# --- a dependency-only release -------------------------------------------------------------------------
def test_a_layer_only_change_replaces_the_layer_and_nothing_of_the_functions_code(life: Lifecycle) -> None:
    up = life.phases["layer-only upgrade"].get()
    before, after = up["before"], up["after"]
    # the layer is new (its content changed: CloudFormation replaces a LayerVersion)
    assert after.physical("AWS::Lambda::LayerVersion") != before.physical("AWS::Lambda::LayerVersion")
    # and the functions' code packages are the ones deployed before
    for prefix in ("Reconciler", "Api"):
        logical = after.logical("AWS::Lambda::Function", prefix)
        code = [s.template["Resources"][logical]["Properties"]["Code"] for s in (before, after)]
        assert code[0] == code[1], prefix
        assert after.resources[logical][1] == before.resources[logical][1], prefix  # updated in place


def test_a_layer_only_change_publishes_a_new_api_version_and_moves_live_to_it(life: Lifecycle) -> None:
    """With ``@aws-cdk/aws-lambda:recognizeLayerVersion`` off, the version's logical id ignores the
    layers: no version is published and the SnapStart alias ``live`` keeps the old dependencies."""
    up = life.phases["layer-only upgrade"].get()
    (version_before, layers_before), (version_after, layers_after) = up["live"]
    layer = up["after"].physical("AWS::Lambda::LayerVersion")
    assert layers_before != [layer]
    assert version_after != version_before, "live still points at the version with the old layer"
    assert layers_after == [layer]
    fns = life.emulator.client("lambda")  # type: ignore[attr-defined]
    reconcile = up["after"].resources[up["after"].logical("AWS::Lambda::Function", "Reconciler")][1]
    assert [x["Arn"] for x in fns.get_function_configuration(FunctionName=reconcile)["Layers"]] == [layer]


# --- destroy -------------------------------------------------------------------------------------------
def test_destroy_removes_the_stack_and_keeps_what_the_template_retains(life: Lifecycle) -> None:
    gone = life.phases["destroy"].get()
    state = gone["state"]
    assert [s["StackStatus"] for s in gone["stacks"]] == ["DELETE_COMPLETE"]
    retain = {k for k, r in state.template["Resources"].items() if r.get("DeletionPolicy") == "Retain"}
    left = {k for k, v in gone["left"].items() if v}
    assert retain == left, (sorted(left - retain), sorted(retain - left))
    assert {state.resources[k][0] for k in retain} == {
        "AWS::DynamoDB::Table",
        "AWS::S3::Bucket",
        "AWS::Logs::LogGroup",
    }
    unknown = {k for k, v in gone["left"].items() if v is None}
    assert {state.resources[k][0] for k in unknown} <= {"AWS::CDK::Metadata"}
