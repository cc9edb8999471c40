"""Names and shared constants of the stack."""

SERVICE = "topogov"
METRICS_NAMESPACE = "Topogov"
RUNTIME = "python3.12"
ARCHITECTURE = "x86_64"  # the layer's wheels are built for manylinux2014_x86_64, cp312
PIP_PLATFORM = "manylinux2014_x86_64"
PYTHON_VERSION = "3.12"
RECONCILER_GROUP = "topogov:reconciler"
API_GROUP = "topogov:api"
SNAPSHOT_KEY = "topology/snapshot.json"
POLICY_IN_BUNDLE = "policy/teams.yaml"
