"""Names and shared constants of the stack."""

SERVICE = "topogov"
METRICS_NAMESPACE = "Topogov"
PIP_PLATFORM = "manylinux2014_x86_64"
PYTHON_VERSION = "3.12"
RECONCILER_GROUP = "topogov:reconciler"
API_GROUP = "topogov:api"
SNAPSHOT_KEY = "topology/snapshot.json"
POLICY_IN_BUNDLE = "policy/teams.yaml"
POLICY_PATH = f"/var/task/{POLICY_IN_BUNDLE}"  # where the functions read it
# CloudWatch Logs' retention periods, in days -> the name of aws_logs.RetentionDays (the one list).
LOG_RETENTION = {
    1: "ONE_DAY", 3: "THREE_DAYS", 5: "FIVE_DAYS", 7: "ONE_WEEK", 14: "TWO_WEEKS", 30: "ONE_MONTH",
    60: "TWO_MONTHS", 90: "THREE_MONTHS", 120: "FOUR_MONTHS", 150: "FIVE_MONTHS", 180: "SIX_MONTHS",
    365: "ONE_YEAR", 400: "THIRTEEN_MONTHS", 545: "EIGHTEEN_MONTHS", 731: "TWO_YEARS",
    1096: "THREE_YEARS", 1827: "FIVE_YEARS", 2192: "SIX_YEARS", 2557: "SEVEN_YEARS",
    2922: "EIGHT_YEARS", 3288: "NINE_YEARS", 3653: "TEN_YEARS",
}  # fmt: skip
