from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from topogov.domain.quantity import Resources, parse_quantity, resources_from
from topogov.domain.views.batch import PodView


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        ("500m", Decimal("0.5")),
        ("16Gi", Decimal(16 * 2**30)),
        ("1e3", Decimal(1000)),
        (8, Decimal(8)),
        ("2k", Decimal(2000)),
        ("1.5", Decimal("1.5")),
        ("100Ki", Decimal(102400)),
    ],
)
def test_parse_quantity(raw, value):
    assert parse_quantity(raw) == value


@pytest.mark.parametrize("raw", ["", "abc", "1Qi", "--1", True])
def test_parse_quantity_rejects_garbage(raw):
    with pytest.raises(ValueError, match="not a quantity"):
        parse_quantity(raw)


def test_pod_requests_take_the_larger_of_containers_and_init():
    pod = {
        "spec": {
            "containers": [
                {"resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "4"}}},
                {"resources": {"requests": {"cpu": "500m"}}},
            ],
            "initContainers": [{"resources": {"requests": {"cpu": "2", "memory": "1Gi"}}}],
        }
    }
    assert PodView.from_api(pod).requests == Resources(gpu=4, efa=0, cpu_m=2000, memory=2**30)


resources = st.builds(Resources, *(st.integers(0, 10**6) for _ in range(4)))


@given(resources, resources)
def test_add_then_subtract_is_identity(a, b):
    assert (a + b) - b == a
    assert Resources.from_json((a + b).to_json()) == a + b


def test_resources_from_ignores_other_resources():
    assert resources_from({"hugepages-2Mi": "0", "pods": "110"}) == Resources()
