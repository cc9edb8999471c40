"""`topogov preflight` against the local stack: the deployed stack on the AWS emulator (moto server with
the project's extensions) and the real Kubernetes control plane with Kueue v0.17.0.

One stack for the module; each failing state is made through the emulator's AWS APIs (or Kubernetes'),
checked, and undone by the fixture that made it, so the tests do not depend on their order. Each test
runs the command as a deployer would: the AWS chain's credentials (moto's ``testing``), the endpoint
from ``AWS_ENDPOINT_URL``, the repository's cdk.json and ``-c`` values."""

from __future__ import annotations

import contextlib
import json
import re
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from topogov_cli.main import main

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = "topogov-local"
OWN_ACCOUNT = "210987654321"  # not one of the example accounts
ROLE = f"arn:aws:iam::{OWN_ACCOUNT}:role/apigateway-cloudwatch"


@pytest.fixture
def deployer(stack, monkeypatch):
    """The deployer's environment: the emulator's endpoint and its default credentials (not the
    function roles' sessions the stack fixture leaves in the environment)."""
    for name in ("AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL", stack.aws_url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    return stack


@pytest.fixture(scope="module")
def own_teams(tmp_path_factory) -> Path:
    """teams.yaml with the example accounts replaced by one of the platform team's own."""
    path = tmp_path_factory.mktemp("policy") / "teams.yaml"
    text = (ROOT / "teams.yaml").read_text(encoding="utf-8")
    path.write_text(text.replace("111122223333", OWN_ACCOUNT).replace("123456789012", OWN_ACCOUNT))
    return path


@pytest.fixture
def ready(deployer, own_teams) -> Iterator[list[str]]:
    """The passing state (API Gateway's CloudWatch role set) and the flags of a passing run."""
    apigw = deployer.client("apigateway")
    apigw.update_account(patchOperations=[{"op": "replace", "path": "/cloudwatchRoleArn", "value": ROLE}])
    yield [
        "preflight",
        "--app",
        str(ROOT),
        "--cluster",
        CLUSTER,
        "--kubeconfig",
        str(deployer.kubeconfig),
        "-c",
        f"topogov:policyFile={own_teams}",
    ]
    apigw.update_account(patchOperations=[{"op": "replace", "path": "/cloudwatchRoleArn", "value": ROLE}])


def preflight(capsys, argv: list[str]) -> tuple[int, dict[str, str]]:
    """Run it; the exit code and each line's status and detail by its check's name."""
    code = main(argv)
    out = capsys.readouterr().out
    lines = {}
    for line in out.splitlines():
        m = re.match(r"^(ok  |FAIL)  (\S.*?)  +(\S.*)$", line)
        if m:
            lines[m.group(2).strip()] = f"{m.group(1).strip()} {m.group(3)}"
    return code, lines


def failed(lines: dict[str, str]) -> list[str]:
    return sorted(k for k, v in lines.items() if v.startswith("FAIL"))


def control(stack, method: str, path: str, body: object = None) -> dict:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(
        stack.aws_url + path, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read() or b"{}")


# -- all passing ----------------------------------------------------------------------------------------
def test_the_local_stack_passes_every_check(ready, capsys):
    # Given the deployed local stack, a CloudWatch role for API Gateway and teams.yaml of one's own accounts
    # When preflight runs with the deployer's credentials
    code, lines = preflight(capsys, ready)
    # Then every check passes, exit 0
    assert failed(lines) == [], lines
    assert code == 0
    assert lines["region"].startswith("ok us-east-1: DescribeInstanceTopology and Lambda SnapStart")
    assert lines["CDK bootstrap"].startswith("ok version ")
    assert lines["authentication mode"] == "ok API_AND_CONFIG_MAP: the stack's access entries are honoured"
    assert lines["access entries"] == f"ok none on {CLUSTER} for the stack's roles but its own"
    assert "reserving 25 leaves" in lines["Lambda concurrency"]
    assert lines["Kueue API version"].startswith("ok v1beta2 (discovered: v1beta2 where served): served")
    # the local stack runs Kueue's manager outside the cluster, and records its image in a Deployment of
    # no replicas (topogov_local.cluster.manifests.kueue_deployment_record)
    assert lines["Kueue version"] == (
        "ok v0.17.0 (the Kueue Deployment's image registry.k8s.io/kueue/kueue:v0.17.0)"
    )
    assert lines["Kueue model profile"] == "ok Kueue v0.17.0 (the model's profile)"
    assert lines["teams.yaml"].endswith("3 teams, no example account")


# -- each failing state -----------------------------------------------------------------------------------
def test_the_repository_teams_yaml_names_its_example_accounts(ready, capsys):
    # Given the repository's own teams.yaml (its example accounts), When preflight runs
    code, lines = preflight(capsys, [*ready[:-2]])
    # Then one failing line per team names the team and its example principals; exit 1
    assert code == 1
    assert failed(lines) == ["teams.yaml admins", "teams.yaml team team-a", "teams.yaml team team-b",
                             "teams.yaml team team-c"]  # fmt: skip
    assert lines["teams.yaml team team-a"].startswith(
        "FAIL still names example accounts (111122223333 and 123456789012): "
        "arn:aws:iam::111122223333:role/TeamA*, arn:aws:iam::123456789012:user/topogov-team-a, "
        "arn:aws:iam::123456789012:role/teams/team-a/* — put"
    )


def test_an_account_without_a_cloudwatch_role_for_api_gateway(ready, deployer, capsys):
    # Given the account has no CloudWatch role for API Gateway
    deployer.client("apigateway").update_account(
        patchOperations=[{"op": "replace", "path": "/cloudwatchRoleArn", "value": ""}]
    )
    # When preflight runs, Then that line fails with both fixes; exit 1
    code, lines = preflight(capsys, ready)
    assert (code, failed(lines)) == (1, ["API Gateway logging role"])
    assert "-c topogov:apiGatewayCloudWatchRole=true" in lines["API Gateway logging role"]
    assert "aws apigateway update-account" in lines["API Gateway logging role"]
    # and the stack creating the role itself is a pass
    code, lines = preflight(capsys, [*ready, "-c", "topogov:apiGatewayCloudWatchRole=true"])
    assert (code, failed(lines)) == (0, [])


@contextlib.contextmanager
def account_limit(stack, executions: int) -> Iterator[None]:
    before = control(stack, "GET", "/_topogov/lambda/account")["concurrent_executions"]
    control(stack, "POST", "/_topogov/lambda/account", {"concurrent_executions": executions})
    try:
        yield
    finally:
        control(stack, "POST", "/_topogov/lambda/account", {"concurrent_executions": before})


def test_a_new_account_of_10_executions_cannot_reserve_25(ready, deployer, capsys):
    # Given an account whose Lambda concurrency limit is a new account's 10
    with account_limit(deployer, 10):
        # When preflight runs with the default reservation (the API's 25)
        code, lines = preflight(capsys, ready)
        # Then the concurrency line fails, saying how to deploy anyway; exit 1
        assert (code, failed(lines)) == (1, ["Lambda concurrency"])
        line = lines["Lambda concurrency"]
        assert line.startswith(
            "FAIL account limit 10, 0 reserved by other functions: reserving 25 for the API"
        )
        assert "Lambda keeps at least 10" in line and "-c topogov:apiReservedConcurrency=0 (none)" in line
        # and reserving none passes
        code, lines = preflight(capsys, [*ready, "-c", "topogov:apiReservedConcurrency=0"])
        assert (code, failed(lines)) == (0, [])
        assert "the stack reserves none" in lines["Lambda concurrency"]


def test_a_region_without_instance_topology(ready, capsys):
    # Given Milan (SnapStart, but no DescribeInstanceTopology), When preflight runs there
    code, lines = preflight(capsys, [*ready, "--region", "eu-south-1"])
    # Then the region line fails naming the API, its documentation and the Regions to use; exit 1
    assert code == 1
    assert lines["region"].startswith("FAIL EC2 DescribeInstanceTopology is not available in 'eu-south-1'")
    assert "ec2-instance-topology-prerequisites.html" in lines["region"]
    assert "deploy to one of: " in lines["region"] and "us-east-1" in lines["region"]


def test_a_missing_bootstrap(ready, deployer, capsys):
    # Given the CDK bootstrap's version parameter is gone (the CDKToolkit stack remains)
    ssm = deployer.client("ssm")
    name = "/cdk-bootstrap/hnb659fds/version"
    kept = ssm.get_parameter(Name=name)["Parameter"]
    ssm.delete_parameter(Name=name)
    try:
        code, lines = preflight(capsys, ready)
    finally:
        ssm.put_parameter(Name=name, Value=kept["Value"], Type=kept["Type"], Overwrite=True)
    # Then the bootstrap line fails with the command to run; exit 1
    assert (code, failed(lines)) == (1, ["CDK bootstrap"])
    assert lines["CDK bootstrap"].endswith("run: npx cdk bootstrap aws://123456789012/us-east-1")


def _cluster(stack, name: str, **kwargs) -> None:
    eks = stack.client("eks")
    eks.create_cluster(name=name, roleArn="arn:aws:iam::123456789012:role/eks", **kwargs)


def test_a_config_map_cluster(ready, deployer, capsys):
    # Given a cluster created in EKS's default mode for the API, CONFIG_MAP
    _cluster(deployer, "legacy", resourcesVpcConfig={"subnetIds": []})
    try:
        code, lines = preflight(capsys, [*ready[:3], "--cluster", "legacy", *ready[5:]])
    finally:
        deployer.client("eks").delete_cluster(name="legacy")
    # Then the mode line fails with the update-cluster-config fix; exit 1
    assert code == 1
    assert lines["authentication mode"] == (
        "FAIL CONFIG_MAP: the stack grants its roles access with access entries, which need API or "
        "API_AND_CONFIG_MAP — run: aws eks update-cluster-config --name legacy "
        "--access-config authenticationMode=API_AND_CONFIG_MAP"
    )


def test_a_private_endpoint_is_unreachable_outside_a_vpc(ready, deployer, capsys):
    # Given a cluster whose public endpoint is off
    _cluster(
        deployer,
        "private",
        resourcesVpcConfig={"subnetIds": [], "endpointPublicAccess": False, "endpointPrivateAccess": True},
        accessConfig={"authenticationMode": "API"},
    )
    eks = deployer.client("eks")
    try:
        code, lines = preflight(capsys, [*ready[:3], "--cluster", "private", *ready[5:]])
        # and one whose public endpoint admits only an office's addresses
        eks.update_cluster_config(
            name="private",
            resourcesVpcConfig={"endpointPublicAccess": True, "publicAccessCidrs": ["203.0.113.0/24"]},
        )
        code2, lines2 = preflight(capsys, [*ready[:3], "--cluster", "private", *ready[5:]])
    finally:
        eks.delete_cluster(name="private")
    # Then, with the functions outside a VPC, the endpoint line fails saying to deploy into the VPC
    assert code == 1 and code2 == 1
    assert lines["endpoint access"].startswith("FAIL public off, private on: the functions run outside a VPC")
    assert (
        "-c topogov:vpcId=... -c topogov:subnetIds=... -c topogov:securityGroupId=..."
        in lines["endpoint access"]
    )
    assert lines2["endpoint access"].startswith(
        "FAIL public 203.0.113.0/24, private on: the functions run outside"
    )


def test_a_vpc_without_nat_or_endpoints(ready, deployer, capsys):
    # Given the functions go into a VPC that has neither a NAT gateway nor VPC endpoints
    ec2 = deployer.client("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.80.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.80.1.0/24")["Subnet"]["SubnetId"]
    group = ec2.create_security_group(GroupName="topogov-fns", Description="fns", VpcId=vpc)["GroupId"]
    in_vpc = [
        "-c",
        f"topogov:vpcId={vpc}",
        "-c",
        f"topogov:subnetIds={subnet}",
        "-c",
        f"topogov:securityGroupId={group}",
    ]
    nats: list[str] = []
    try:
        code, lines = preflight(capsys, [*ready, *in_vpc])
        # When a private NAT gateway is added (it reaches no public endpoint), then a public one
        private = ec2.create_nat_gateway(SubnetId=subnet, ConnectivityType="private")["NatGateway"]
        nats.append(private["NatGatewayId"])
        code_private, lines_private = preflight(capsys, [*ready, *in_vpc])
        eip = ec2.allocate_address(Domain="vpc")["AllocationId"]
        nats.append(ec2.create_nat_gateway(SubnetId=subnet, AllocationId=eip)["NatGateway"]["NatGatewayId"])
        code_public, lines_public = preflight(capsys, [*ready, *in_vpc])
    finally:
        for nat in nats:
            ec2.delete_nat_gateway(NatGatewayId=nat)
        ec2.delete_security_group(GroupId=group)
        ec2.delete_subnet(SubnetId=subnet)
        ec2.delete_vpc(VpcId=vpc)
    # Then without a NAT the egress line fails naming each service the functions call; exit 1
    assert (code, failed(lines)) == (1, ["VPC egress"])
    assert lines["VPC egress"].startswith(
        f"FAIL {vpc} has no public NAT gateway and no VPC endpoint for eks, ec2, s3, dynamodb"
    )
    # a private NAT gateway changes nothing; a public one passes
    assert (code_private, failed(lines_private)) == (1, ["VPC egress"])
    assert (code_public, failed(lines_public)) == (0, [])
    assert lines_public["VPC egress"].startswith(f"ok NAT gateway {nats[1]} in {vpc}")


def test_an_access_entry_the_stack_did_not_create(ready, deployer, capsys):
    # Given another cluster (API mode) where someone created an access entry for the stack's reconciler role
    _cluster(
        deployer, "other", resourcesVpcConfig={"subnetIds": []}, accessConfig={"authenticationMode": "API"}
    )
    eks = deployer.client("eks")
    role = deployer.output("ReconcilerRoleArn")
    eks.create_access_entry(clusterName="other", principalArn=role)
    try:
        # When preflight runs for a deploy to that cluster
        code, lines = preflight(capsys, [*ready[:3], "--cluster", "other", *ready[5:]])
    finally:
        eks.delete_access_entry(clusterName="other", principalArn=role)
        eks.delete_cluster(name="other")
    # Then the line fails naming the role and the command that removes the entry; exit 1
    assert code == 1
    assert lines["access entries"].startswith(f"FAIL {role} already has an access entry on other")
    assert lines["access entries"].endswith(
        f"aws eks delete-access-entry --cluster-name other --principal-arn {role}"
    )


@contextlib.contextmanager
def kueue_deployment(stack, image: str, args: list[str]) -> Iterator[None]:
    """Kueue's manager Deployment as its release manifests make it (config/default), with no replicas:
    the API state preflight reads on a real cluster."""
    kube = stack.kube()
    body = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "kueue-controller-manager",
            "namespace": "kueue-system",
            "labels": {"app.kubernetes.io/name": "kueue", "control-plane": "controller-manager"},
        },
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"control-plane": "controller-manager"}},
            "template": {
                "metadata": {"labels": {"control-plane": "controller-manager"}},
                "spec": {"containers": [{"name": "manager", "image": image, "args": args}]},
            },
        },
    }
    path = "/apis/apps/v1/namespaces/kueue-system/deployments"
    # the local stack's own record of its Kueue (a Deployment of no replicas): put back afterwards
    record = kube.request("GET", f"{path}/kueue-controller-manager").body
    record["metadata"] = {k: record["metadata"][k] for k in ("name", "namespace", "labels", "annotations")}
    record.pop("status", None)
    kube.request("DELETE", f"{path}/kueue-controller-manager")
    resp = kube.request("POST", path, body=body)
    assert resp.status == 201, resp.body
    try:
        yield
    finally:
        kube.request("DELETE", f"{path}/kueue-controller-manager")
        assert kube.request("POST", path, body=record).status == 201


def test_an_old_kueue_with_topology_aware_scheduling_off(ready, deployer, capsys):
    # Given Kueue's manager deployed from v0.13.4's image with the TAS gate off
    with kueue_deployment(
        deployer, "registry.k8s.io/kueue/kueue:v0.13.4", ["--feature-gates=TopologyAwareScheduling=false"]
    ):
        code, lines = preflight(capsys, ready)
    # Then the version and TAS lines fail, each with its fix; exit 1
    assert (code, failed(lines)) == (1, ["Kueue version", "topology-aware scheduling"])
    assert lines["Kueue version"] == (
        "FAIL v0.13.4 (the Kueue Deployment's image registry.k8s.io/kueue/kueue:v0.13.4): "
        "Topogov follows v0.17.0 — upgrade Kueue"
    )
    assert lines["topology-aware scheduling"].startswith("FAIL TopologyAwareScheduling=false — remove that")


def test_kueue_v0_17_from_its_release_manifest_passes(ready, deployer, capsys):
    # Given the release's manager Deployment (v0.17.0, no gate set: TAS is on by default)
    with kueue_deployment(deployer, "registry.k8s.io/kueue/kueue:v0.17.0", ["--zap-log-level=2"]):
        code, lines = preflight(capsys, ready)
    assert (code, failed(lines)) == (0, [])
    assert (
        lines["Kueue version"]
        == "ok v0.17.0 (the Kueue Deployment's image registry.k8s.io/kueue/kueue:v0.17.0)"
    )
    assert lines["topology-aware scheduling"] == "ok on by default since Kueue v0.14; no gate set"


@pytest.fixture
def eks_front_door(deployer) -> Iterator[None]:
    """The cluster's DescribeCluster endpoint made EKS's (IAM authentication through access entries,
    :mod:`topogov_local.eks_endpoint`, as the rehearsal runs it): the local stack's own endpoint is the
    API server's fault proxy, which knows no EKS token. Put back afterwards."""
    from topogov_local.eks_endpoint import EksEndpoint

    cluster, emulator = deployer.cluster, deployer.emulator
    pki = cluster.pki
    endpoint = EksEndpoint(
        CLUSTER,
        aws_url=deployer.aws_url,
        apiserver_url=cluster.apiserver_url,
        ca=pki.ca,
        cert=pki.directory / "proxy.crt",
        key=pki.directory / "proxy.key",
        admin_token=pki.token("admin"),
    ).start()
    try:
        emulator.register_cluster(CLUSTER, endpoint.url, pki.ca.read_bytes())
        yield
    finally:
        emulator.register_cluster(CLUSTER, cluster.url, pki.ca.read_bytes())
        endpoint.stop()


def test_without_a_kubeconfig_kubernetes_is_reached_as_the_functions_reach_it(
    ready, deployer, eks_front_door, monkeypatch, capsys
):
    # Given no --kubeconfig (the cluster's EKS endpoint, a token of the deployer's credentials) and a
    # deployer who is an IAM user with no access entry on the cluster
    iam = deployer.client("iam")
    iam.create_user(UserName="deployer")
    key = iam.create_access_key(UserName="deployer")["AccessKey"]
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", key["AccessKeyId"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", key["SecretAccessKey"])
    me = "arn:aws:iam::123456789012:user/deployer"
    argv = [a for i, a in enumerate(ready) if a != "--kubeconfig" and ready[i - 1] != "--kubeconfig"]
    eks = deployer.client("eks")
    try:
        code, lines = preflight(capsys, argv)
        # When an access entry for the deployer is added (no Kubernetes groups: discovery is everyone's)
        eks.create_access_entry(clusterName=CLUSTER, principalArn=me)
        code2, lines2 = preflight(capsys, argv)
    finally:
        with contextlib.suppress(Exception):
            eks.delete_access_entry(clusterName=CLUSTER, principalArn=me)
        iam.delete_access_key(UserName="deployer", AccessKeyId=key["AccessKeyId"])
        iam.delete_user(UserName="deployer")
    # Then first EKS answers 401 and the Kueue line says to add an entry (or give --kubeconfig); exit 1
    assert (code, failed(lines)) == (1, ["Kueue"])
    assert lines["Kueue"].startswith("FAIL GET /apis/kueue.x-k8s.io: HTTP 401")
    assert f"aws eks create-access-entry --cluster-name {CLUSTER} --principal-arn YOUR_ARN" in lines["Kueue"]
    # and with the entry every check passes, Kueue read through EKS's authentication
    assert (code2, failed(lines2)) == (0, []), lines2.get("NVIDIA device plugin")
    assert lines2["credentials"].startswith(f"ok {me} ")
    assert lines2["Kueue API version"].startswith("ok v1beta2 (discovered: v1beta2 where served): served")


# -- usage ------------------------------------------------------------------------------------------------
def test_a_context_value_the_stack_would_refuse_is_a_usage_error(ready, capsys):
    code = main([*ready, "-c", "topogov:kueueApiVersion=v1alpha1"])
    err = capsys.readouterr().err
    assert code == 2
    assert (
        "topogov:kueueApiVersion: 'v1alpha1' is not a version the governor writes (v1beta1, v1beta2)" in err
    )


def test_credentials_aws_refuses_exit_3(ready, deployer, monkeypatch, capsys):
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    code, lines = preflight(capsys, ready)
    assert code == 3
    assert lines["credentials"].startswith("FAIL EndpointConnectionError")
