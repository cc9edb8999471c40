"""`topogov preflight` reads the deploy context itself (the CLI never imports the CDK app): its defaults
and its reading of cdk.json and -c must be the app's."""

from __future__ import annotations

import json

import pytest

from infra.config import DeployConfig
from topogov_cli.client import CliError
from topogov_cli.preflight import KUEUE_API_VERSIONS, Context, read_context


@pytest.mark.parametrize(
    "field", ["policy_file", "api_reserved_concurrency", "kueue_api_version", "api_gateway_cloud_watch_role"]
)
def test_the_defaults_are_deploy_configs(field):
    assert getattr(Context(), field) == DeployConfig.model_fields[field].default


def test_the_kueue_versions_are_the_ones_deploy_config_accepts():
    from typing import get_args

    # Optional[Literal[...]]: unset means discovered (v1beta2 where served)
    literal, none = get_args(DeployConfig.model_fields["kueue_api_version"].annotation)
    assert get_args(literal) == KUEUE_API_VERSIONS and none is type(None)


def test_cdk_json_then_cdk_context_json_then_c_as_the_cdk_cli(tmp_path):
    # Given cdk.json's context, cdk.context.json over it, and -c over both
    context = {"topogov:clusterName": "a", "topogov:apiReservedConcurrency": 5, "topogov:region": "us-west-2"}
    (tmp_path / "cdk.json").write_text(json.dumps({"app": "x", "context": context}))
    (tmp_path / "cdk.context.json").write_text(json.dumps({"topogov:clusterName": "b"}))
    ctx = read_context(tmp_path, ["topogov:apiReservedConcurrency=0", "topogov:subnetIds=subnet-1,subnet-2"])
    # Then each value comes from the last place that gives it
    assert ctx.cluster_name == "b"
    assert ctx.region == "us-west-2"
    assert ctx.api_reserved_concurrency == 0
    assert ctx.subnet_ids == ("subnet-1", "subnet-2") and ctx.in_vpc


@pytest.mark.parametrize(
    ("pair", "says"),
    [
        (
            "topogov:apiReservedConcurrency=some",
            "topogov:apiReservedConcurrency: 'some' is not a whole number",
        ),
        ("topogov:kueueApiVersion=v2", "topogov:kueueApiVersion: 'v2' is not a version the governor writes"),
        ("topogov:apiGatewayCloudWatchRole=yes", "topogov:apiGatewayCloudWatchRole: 'yes' is neither true"),
        ("topogov:clusterName", "-c topogov:clusterName: give KEY=VALUE"),
    ],
)
def test_a_bad_value_is_a_usage_error_naming_the_key(tmp_path, pair, says):
    with pytest.raises(CliError) as exc:
        read_context(tmp_path, [pair])
    assert exc.value.exit_code == 2
    assert exc.value.message.startswith(says)
