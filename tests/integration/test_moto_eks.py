"""EKS in the emulator (topogov_local.aws.eks): a cluster's authentication mode and endpoint access as
DescribeCluster answers them, UpdateClusterConfig, and the access-entry API refused on a CONFIG_MAP
cluster. boto3 against the moto server, over HTTP."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from topogov_local.rehearse import Emulator

ROLE = "arn:aws:iam::123456789012:role/eks"
PRINCIPAL = "arn:aws:iam::123456789012:role/topogov-reconcile"
NEEDS_API = (
    "The cluster's authentication mode must be set to one of [API, API_AND_CONFIG_MAP] "
    "to perform this operation."
)


@pytest.fixture(scope="module")
def eks(tmp_path_factory):
    em = Emulator(tmp_path_factory.mktemp("moto-eks")).start()
    try:
        yield em.client("eks")
    finally:
        em.stop()


def test_a_cluster_without_access_config_is_config_map_with_eks_endpoint_defaults(eks):
    # When a cluster is created by the API naming only its subnets
    eks.create_cluster(name="plain", roleArn=ROLE, resourcesVpcConfig={"subnetIds": ["subnet-1"]})
    cluster = eks.describe_cluster(name="plain")["cluster"]
    # Then EKS's defaults: CONFIG_MAP, public endpoint open to all, private off
    assert cluster["accessConfig"] == {"authenticationMode": "CONFIG_MAP"}
    vpc = cluster["resourcesVpcConfig"]
    assert (vpc["endpointPublicAccess"], vpc["endpointPrivateAccess"], vpc["publicAccessCidrs"]) == (
        True,
        False,
        ["0.0.0.0/0"],
    )
    assert vpc["subnetIds"] == ["subnet-1"]


def test_create_cluster_keeps_its_access_config_and_endpoint_access(eks):
    eks.create_cluster(
        name="private",
        roleArn=ROLE,
        resourcesVpcConfig={"subnetIds": [], "endpointPublicAccess": False, "endpointPrivateAccess": True},
        accessConfig={"authenticationMode": "API"},
    )
    cluster = eks.describe_cluster(name="private")["cluster"]
    assert cluster["accessConfig"]["authenticationMode"] == "API"
    vpc = cluster["resourcesVpcConfig"]
    assert (vpc["endpointPublicAccess"], vpc["endpointPrivateAccess"]) == (False, True)


def test_access_entries_are_refused_on_config_map_and_served_once_the_api_is_on(eks):
    # Given a CONFIG_MAP cluster
    eks.create_cluster(name="legacy", roleArn=ROLE, resourcesVpcConfig={"subnetIds": []})
    # When an access entry is created
    with pytest.raises(ClientError) as refused:
        eks.create_access_entry(clusterName="legacy", principalArn=PRINCIPAL)
    # Then EKS's refusal
    err = refused.value.response
    assert (err["Error"]["Code"], err["Error"]["Message"], err["ResponseMetadata"]["HTTPStatusCode"]) == (
        "InvalidRequestException",
        NEEDS_API,
        400,
    )
    # When the mode is moved on to API_AND_CONFIG_MAP (answered as an update, as EKS does)
    update = eks.update_cluster_config(
        name="legacy", accessConfig={"authenticationMode": "API_AND_CONFIG_MAP"}
    )
    assert (update["update"]["type"], update["update"]["status"]) == ("AccessConfigUpdate", "Successful")
    # Then the entry is created, listed, described and deleted
    entry = eks.create_access_entry(clusterName="legacy", principalArn=PRINCIPAL, kubernetesGroups=["g"])
    assert entry["accessEntry"]["username"] == (
        "arn:aws:sts::123456789012:assumed-role/topogov-reconcile/{{SessionName}}"
    )
    assert eks.list_access_entries(clusterName="legacy")["accessEntries"] == [PRINCIPAL]
    described = eks.describe_access_entry(clusterName="legacy", principalArn=PRINCIPAL)["accessEntry"]
    assert described["kubernetesGroups"] == ["g"]
    with pytest.raises(ClientError) as again:
        eks.create_access_entry(clusterName="legacy", principalArn=PRINCIPAL)
    assert again.value.response["Error"]["Code"] == "ResourceInUseException"
    eks.delete_access_entry(clusterName="legacy", principalArn=PRINCIPAL)
    assert eks.list_access_entries(clusterName="legacy")["accessEntries"] == []


def test_the_authentication_mode_changes_one_way_only_and_endpoint_updates_change_only_what_they_name(eks):
    eks.create_cluster(
        name="oneway",
        roleArn=ROLE,
        resourcesVpcConfig={"subnetIds": []},
        accessConfig={"authenticationMode": "API"},
    )
    with pytest.raises(ClientError) as refused:
        eks.update_cluster_config(name="oneway", accessConfig={"authenticationMode": "CONFIG_MAP"})
    assert refused.value.response["Error"]["Code"] == "InvalidParameterException"
    assert "accessConfig.authenticationMode: API cannot change to CONFIG_MAP" in str(refused.value)
    eks.update_cluster_config(name="oneway", resourcesVpcConfig={"publicAccessCidrs": ["203.0.113.0/24"]})
    vpc = eks.describe_cluster(name="oneway")["cluster"]["resourcesVpcConfig"]
    assert (vpc["publicAccessCidrs"], vpc["endpointPublicAccess"]) == (["203.0.113.0/24"], True)


def test_addons_are_created_once_described_and_listed_on_an_existing_cluster(eks):
    eks.create_cluster(name="addons", roleArn=ROLE, resourcesVpcConfig={"subnetIds": []})
    name = "amazon-sagemaker-hyperpod-taskgovernance"
    with pytest.raises(ClientError) as absent:
        eks.describe_addon(clusterName="addons", addonName=name)
    assert absent.value.response["Error"]["Code"] == "ResourceNotFoundException"
    created = eks.create_addon(clusterName="addons", addonName=name, addonVersion="v1.6.0-eksbuild.1")[
        "addon"
    ]
    assert (created["addonName"], created["status"]) == (name, "ACTIVE")
    described = eks.describe_addon(clusterName="addons", addonName=name)["addon"]
    assert (described["addonVersion"], described["clusterName"]) == ("v1.6.0-eksbuild.1", "addons")
    assert eks.list_addons(clusterName="addons")["addons"] == [name]
    with pytest.raises(ClientError) as twice:
        eks.create_addon(clusterName="addons", addonName=name)
    assert twice.value.response["Error"]["Code"] == "ResourceInUseException"
    with pytest.raises(ClientError) as nowhere:
        eks.create_addon(clusterName="no-such-cluster", addonName=name)
    assert nowhere.value.response["Error"]["Code"] == "ResourceNotFoundException"
