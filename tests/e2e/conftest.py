"""A local stack per end-to-end module (subprocess emulators over real HTTP)."""

from __future__ import annotations

import os

import pytest

from topogov_local.stack import LocalStack, StackOptions

FLEET = "p5.48xlarge=16,p6-b200.48xlarge=2,c5.2xlarge=1"


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    directory = tmp_path_factory.mktemp("local")
    with LocalStack(
        StackOptions(directory=directory, fleet=FLEET, ec2_rate=1000, ec2_burst=1000, api_port=None)
    ) as s:
        saved = dict(os.environ)
        os.environ.update(s.env())
        os.environ["TOPOGOV_EC2_RATE_PER_S"] = "1000"
        yield s
        os.environ.clear()
        os.environ.update(saved)
