"""AWS's own example of topology-aware scheduling on HyperPod (``examples/test-tas-job.yaml``, one
source): the API accepts it as is; the walkthrough submits it and the tests check it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

EXAMPLE_FILE = Path(__file__).resolve().parents[2] / "examples" / "test-tas-job.yaml"
AWS_EXAMPLE: dict[str, Any] = yaml.safe_load(EXAMPLE_FILE.read_text())
