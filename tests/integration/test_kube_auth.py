"""EKS authentication: the token is a presigned STS URL that STS (moto, over HTTP) accepts."""

from __future__ import annotations

import base64
import urllib.parse

import pytest

from topogov.adapters.kube_auth import (
    CLUSTER_ID_HEADER,
    TOKEN_PREFIX,
    EksTokenSource,
    describe_cluster,
    eks_api_client,
    eks_token,
)

from .conftest import aws_client


def decode(token: str) -> str:
    body = token[len(TOKEN_PREFIX) :]
    return base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).decode()


def test_token_is_a_presigned_get_caller_identity_signed_with_the_cluster_header(aws_url):
    token = eks_token(aws_client(aws_url, "sts"), "prod-gpu")
    assert token.startswith(TOKEN_PREFIX) and "=" not in token
    url = decode(token)
    query = urllib.parse.parse_qs(urllib.parse.urlparse(url).query)
    assert query["Action"] == ["GetCallerIdentity"]
    assert CLUSTER_ID_HEADER in query["X-Amz-SignedHeaders"][0].split(";")
    assert query["X-Amz-Expires"] == ["60"]
    # SigV4 query authentication scoped to STS, as EKS's authenticator verifies it
    assert query["X-Amz-Algorithm"] == ["AWS4-HMAC-SHA256"]
    assert query["X-Amz-Credential"][0].endswith("/us-east-1/sts/aws4_request")
    assert len(query["X-Amz-Signature"][0]) == 64


def test_tokens_are_reused_then_refreshed_before_they_expire(aws_url):
    now = [0.0]
    source = EksTokenSource(aws_client(aws_url, "sts"), "c1", refresh_s=600, clock=lambda: now[0])
    first = source.token()
    now[0] = 599
    assert source.token() == first and source.minted == 1
    now[0] = 600
    source.token()
    assert source.minted == 2


def test_endpoint_and_ca_come_from_describe_cluster_and_the_client_sends_a_fresh_token(aws_url):
    eks = aws_client(aws_url, "eks")
    eks.create_cluster(
        name="gpu",
        roleArn="arn:aws:iam::123456789012:role/eks",
        resourcesVpcConfig={"subnetIds": ["subnet-1"]},
        accessConfig={
            "authenticationMode": "API_AND_CONFIG_MAP"
        },  # access entries need it (EKS's default: CONFIG_MAP)
    )
    endpoint = describe_cluster(eks, "gpu")
    assert endpoint.endpoint.startswith("https://")
    now = [0.0]
    source = EksTokenSource(aws_client(aws_url, "sts"), "gpu", refresh_s=600, clock=lambda: now[0])
    client = eks_api_client(endpoint, source)
    cfg = client.configuration
    assert cfg.host == endpoint.endpoint and cfg.verify_ssl
    with open(cfg.ssl_ca_cert, "rb") as fh:
        assert fh.read() == endpoint.ca_data
    first = cfg.auth_settings()["BearerToken"]["value"]
    now[0] = 700
    cfg.refresh_api_key_hook(cfg)
    second = cfg.auth_settings()["BearerToken"]["value"]
    # (two tokens minted in the same second are identical: X-Amz-Date has one-second resolution)
    assert first.startswith("Bearer k8s-aws-v1.") and second.startswith("Bearer k8s-aws-v1.")
    assert source.minted == 2


def test_a_config_map_only_cluster_is_a_clear_error_with_the_fix(aws_url):
    """Access entries (how the stack grants the roles) need authentication mode API or
    API_AND_CONFIG_MAP (EKS User Guide, grant-k8s-access.html). DescribeCluster reports the mode in
    ``accessConfig``; a cluster the EKS API creates without one is CONFIG_MAP (the emulator keeps the
    mode as EKS does: topogov_local.aws.eks)."""
    from topogov.domain.errors import ConfigError

    eks = aws_client(aws_url, "eks")
    eks.create_cluster(
        name="old", roleArn="arn:aws:iam::123456789012:role/eks", resourcesVpcConfig={"subnetIds": []}
    )
    with pytest.raises(ConfigError, match="authenticationMode=API_AND_CONFIG_MAP"):
        describe_cluster(eks, "old")
    eks.update_cluster_config(name="old", accessConfig={"authenticationMode": "API_AND_CONFIG_MAP"})
    assert describe_cluster(eks, "old").endpoint.startswith("https://")
