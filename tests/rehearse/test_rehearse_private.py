"""The private-cluster variant in a new account, rehearsed (issue 22): ``cdk deploy`` with ``vpcId`` /
``subnetIds`` / ``securityGroupId`` (a VPC, subnets and a security group created in the emulator) into
an account whose Lambda concurrency limit is a new account's 10, with ``apiReservedConcurrency=0``.
The emulator refuses what Lambda refuses (topogov_local.aws.lambdas): a VPC function whose role cannot
create network interfaces, a reservation that leaves less than the minimum unreserved. Its own
emulator, so the default stack's lifecycle (test_rehearse.py) is not touched."""

from __future__ import annotations

from typing import Any

import pytest

from tests.rehearse import variants
from tests.rehearse.conftest import CLUSTER
from topogov_local.rehearse import (
    ACCOUNT,
    REGION,
    Cdk,
    Emulator,
    keep_assets,
    role_grants,
    seed_assets,
    stack_state,
)

ENI_ACTIONS = {"ec2:CreateNetworkInterface", "ec2:DescribeNetworkInterfaces", "ec2:DeleteNetworkInterface"}


@pytest.fixture(scope="module")
def private(tmp_path_factory: Any, rehearse_report: dict[str, Any]) -> Any:
    directory = tmp_path_factory.mktemp("rehearse-private")
    emulator = Emulator(directory / "aws").start()
    cdk = None
    try:
        limit = variants.NEW_ACCOUNT_CONCURRENCY
        emulator.control("POST", "/_topogov/lambda/account", {"concurrent_executions": limit})
        network = variants.private_network(emulator.client("ec2"))
        # the access entries name the cluster; nothing here reaches its endpoint
        emulator.register_cluster(CLUSTER, "https://127.0.0.1:9", b"not used")
        context = {
            "clusterName": CLUSTER, "account": ACCOUNT, "region": REGION, **network,
            "apiReservedConcurrency": "0",
        }  # fmt: skip
        cdk = Cdk(emulator.url, directory / "cdk.out", directory / "cdk.log")
        seed_assets(cdk.out)
        with variants.context_file_kept():  # the CLI caches the Availability Zones it looked up
            cdk.wait(cdk.synth(context))
        keep_assets(cdk.out)
        cdk.bootstrap()
        cdk.deploy_assembly()
        state = stack_state(emulator.client("cloudformation"))
        rehearse_report["private_new_account"] = {
            "status": state.status,
            "concurrency_limit": limit,
            "cdk_seconds": {f"{r.args[0]} #{i}": round(r.seconds, 1) for i, r in enumerate(cdk.runs, 1)},
        }
        yield {"emulator": emulator, "state": state, "network": network}
    finally:  # nothing started here outlives the module, whatever failed
        if cdk is not None:
            cdk.cancel()
        emulator.stop()


def _functions(private: Any) -> dict[str, str]:
    state = private["state"]
    return {p: state.resources[state.logical("AWS::Lambda::Function", p)][1] for p in ("Reconciler", "Api")}


def test_the_private_variant_deploys_into_a_10_execution_account(private: Any) -> None:
    assert private["state"].status == "CREATE_COMPLETE"
    limit = private["emulator"].client("lambda").get_account_settings()["AccountLimit"]
    assert limit["ConcurrentExecutions"] == variants.NEW_ACCOUNT_CONCURRENCY


def test_no_function_reserves_concurrency_so_all_of_it_stays_unreserved(private: Any) -> None:
    fns = private["emulator"].client("lambda")
    for prefix, name in _functions(private).items():
        assert fns.get_function_concurrency(FunctionName=name).get("ReservedConcurrentExecutions") is None, (
            prefix
        )
    assert fns.get_account_settings()["AccountLimit"]["UnreservedConcurrentExecutions"] == 10


def test_both_functions_run_in_the_given_subnets_with_roles_that_may_manage_their_interfaces(
    private: Any,
) -> None:
    fns, iam = private["emulator"].client("lambda"), private["emulator"].client("iam")
    network = private["network"]
    for prefix, name in _functions(private).items():
        config = fns.get_function(FunctionName=name)["Configuration"]
        vpc = config["VpcConfig"]
        assert sorted(vpc["SubnetIds"]) == sorted(network["subnetIds"].split(",")), prefix
        assert vpc["SecurityGroupIds"] == [network["securityGroupId"]], prefix
        granted = {g.action for g in role_grants(iam, config["Role"].rsplit("/", 1)[-1]) if g.resource == "*"}
        assert granted >= ENI_ACTIONS, prefix
