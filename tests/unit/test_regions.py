"""The Regions the stack can run in: both DescribeInstanceTopology and Lambda SnapStart exist there."""

from topogov.domain import regions


def test_a_region_with_both_features_is_supported() -> None:
    # Given us-east-1, on both AWS pages  When asked  Then nothing is missing
    assert regions.unsupported("us-east-1") == []


def test_a_region_without_instance_topology_names_the_feature_and_the_page() -> None:
    # Given Milan: SnapStart yes (a commercial Region), instance topology no
    missing = regions.unsupported("eu-south-1")
    assert missing == [
        f"EC2 DescribeInstanceTopology is not available in 'eu-south-1' (Regions: {regions.TOPOLOGY_DOC})"
    ]


def test_a_region_without_either_lists_both() -> None:
    # Given Taipei: on neither page
    missing = regions.unsupported("ap-east-2")
    assert [m.split(" is not")[0] for m in missing] == ["EC2 DescribeInstanceTopology", "Lambda SnapStart"]


def test_govcloud_has_topology_but_snapstart_is_documented_for_commercial_regions_only() -> None:
    assert [m.split(" is not")[0] for m in regions.unsupported("us-gov-west-1")] == ["Lambda SnapStart"]


def test_the_supported_list_is_the_intersection_sorted() -> None:
    listed = regions.supported_list().split(", ")
    assert listed == sorted(listed)
    assert set(listed) == regions.TOPOLOGY_REGIONS & regions.SNAPSTART_REGIONS
    assert "ap-southeast-6" not in listed and "us-west-2" in listed
