"""Typed events and configuration of the reconcile function."""

import pytest
from pydantic import ValidationError

from topogov.domain.errors import ConfigError
from topogov.handlers.events import Ec2StateChangeEvent, ScheduledEvent, parse_reconcile_event
from topogov.handlers.reconcile import options_for
from topogov.settings import ReconcileSettings
from topogov_local import events

CFG = ReconcileSettings(kubeconfig="/k", snapshot_bucket="bucket", budget_margin_s=10)


def test_a_schedule_event_is_a_full_pass_with_a_deadline_inside_the_timeout():
    assert isinstance(parse_reconcile_event(events.scheduled_event()), ScheduledEvent)
    opts = options_for(events.scheduled_event(), remaining_s=60, cfg=CFG)
    assert opts.targeted_instance_ids is None


def test_a_running_state_change_is_a_targeted_pass_for_that_instance():
    event = events.state_change_event("i-0123456789abcdef0")
    assert isinstance(parse_reconcile_event(event), Ec2StateChangeEvent)
    opts = options_for(event, remaining_s=60, cfg=CFG)
    assert opts.targeted_instance_ids == frozenset({"i-0123456789abcdef0"})


def test_other_states_are_ignored():
    assert options_for(events.state_change_event("i-0123456789abcdef0", "stopping"), 60, CFG) is None


@pytest.mark.parametrize(
    "mutate",
    [
        lambda e: e.update({"detail-type": "Something Else"}),
        lambda e: e["detail"].update({"instance-id": "not-an-id"}),
        lambda e: e.pop("detail"),
    ],
)
def test_malformed_events_are_refused_with_the_field(mutate):
    event = events.state_change_event("i-0123456789abcdef0")
    mutate(event)
    with pytest.raises(ValidationError):
        parse_reconcile_event(event)


def test_settings_from_env_name_the_variable_in_errors():
    with pytest.raises(ConfigError, match="TOPOGOV_EC2_RATE_PER_S"):
        ReconcileSettings.from_env(
            {"TOPOGOV_KUBECONFIG": "/k", "TOPOGOV_SNAPSHOT_BUCKET": "bucket", "TOPOGOV_EC2_RATE_PER_S": "0"}
        )
    with pytest.raises(ConfigError, match="exactly one of"):
        ReconcileSettings.from_env({"TOPOGOV_SNAPSHOT_BUCKET": "bucket"})


def test_settings_defaults():
    s = ReconcileSettings.from_env(
        {"TOPOGOV_CLUSTER_NAME": "gpu", "TOPOGOV_SNAPSHOT_BUCKET": "bkt", "AWS_REGION": "us-west-2"}
    )
    assert (s.ec2_rate_per_s, s.refresh_after_s, s.page_size, s.region) == (1.0, 86400, 500, "us-west-2")


def test_settings_write_the_environment_they_read():
    from topogov.settings import ApiSettings, ReconcileSettings

    api = ApiSettings(
        cluster_name="gpu", policy_file="/var/task/policy/teams.yaml", snapshot_bucket="bkt",
        ledger_table="led", counters_table="cnt", idempotency_table="idem",
    )  # fmt: skip
    assert ApiSettings.from_env(api.to_env()) == api
    rec = ReconcileSettings(cluster_name="gpu", snapshot_bucket="bkt", governor=False, budget_margin_s=30)
    env = rec.to_env()
    assert env["TOPOGOV_GOVERNOR"] == "false" and "TOPOGOV_PAGE_SIZE" not in env  # defaults stay in code
    assert ReconcileSettings.from_env(env) == rec
