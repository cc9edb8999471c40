"""The data scientist's command line end to end: ``topogov submit | jobs | job | cancel | teams |
topology`` run as subprocesses against the local stack's API, signing with the team profiles of its
``aws-credentials`` through botocore's ordinary credential chain (AWS_PROFILE +
AWS_SHARED_CREDENTIALS_FILE; no keys in the environment). Nothing is patched."""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.stacks import hold_queue, shared_stack, wait_until
from topogov_cli.main import main
from topogov_local.aws_example import AWS_EXAMPLE

LAMBDAS = str(Path(__file__).resolve().parents[2] / "lambdas")


NEW_COMMANDS = [["submit"], ["jobs"], ["job"], ["cancel"], ["teams"], ["topology"], ["doctor"]]


@pytest.fixture(scope="module")
def stack(shared_stacks):
    """The worker's stack of the API's kind, in <dir>/.topogov/local as `topogov local` makes it."""
    with shared_stack(shared_stacks, "api") as s:
        yield s


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    """A HOME of its own: no ~/.aws or ~/.config/topogov of the machine's user leaks in."""
    return tmp_path_factory.mktemp("home")


def run(stack, *argv, profile="topogov-team-a", endpoint=True, cwd=None, home=None, **env_extra):
    """``python -m topogov_cli.main ARGV`` as a data scientist runs it: credentials from a profile of
    the stack's shared-credentials file, the endpoint from TOPOGOV_ENDPOINT (unless ``endpoint`` is
    False), and no AWS keys or Topogov settings inherited from the test process (nor COLUMNS,
    which pytest's workers set: output to a pipe is never wrapped)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AWS_", "TOPOGOV_", "POWERTOOLS_", "KUBECONFIG", "COLUMNS"))
    }
    env.update(
        {
            "PYTHONPATH": LAMBDAS,
            "AWS_SHARED_CREDENTIALS_FILE": str(stack.credentials) if stack else "/nonexistent",
            "AWS_EC2_METADATA_DISABLED": "true",  # no instance-metadata probe when a test has no keys
        }
    )
    if profile:
        env["AWS_PROFILE"] = profile
    if home is not None:
        env["HOME"] = str(home)
    if endpoint and stack is not None:
        env["TOPOGOV_ENDPOINT"] = stack.api.url
    env.update({k: str(v) for k, v in env_extra.items()})
    return subprocess.run(
        [sys.executable, "-m", "topogov_cli.main", *map(str, argv)],
        cwd=cwd or (home if home is not None else None),
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def ok(out):
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return out.stdout


def job_args(name, *extra):
    return ["--job-name", name, "--image", "pytorch:2.5", "--accelerators", "8", "--efa", "32", *extra]


def in_flight_gpu(stack, home, team="team-a", profile="topogov-team-a"):
    view = json.loads(ok(run(stack, "teams", "--team", team, "--output", "json", profile=profile, home=home)))
    return view["in_flight"]["nvidia.com/gpu"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- help ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("cmd", [[], *NEW_COMMANDS], ids=lambda c: " ".join(c) or "topogov")
def test_every_command_has_help_with_the_exit_codes(cmd, capsys):
    with pytest.raises(SystemExit) as exc:
        main([*cmd, "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: topogov")
    assert "exit codes:" in out and "3  unreachable or not authenticated" in out


def test_help_runs_as_a_subprocess_too(home):
    out = run(None, "submit", "--help", endpoint=False, home=home)
    assert ok(out).startswith("usage: topogov submit")
    assert "--required-topology LEVEL" in out.stdout and "--idempotency-key KEY" in out.stdout


# -- submit -------------------------------------------------------------------------------------------
def test_submit_a_high_level_job_that_fits_prints_the_decision(stack, home):
    # When team-a submits 4 pods of 8 GPUs, required in one layer-3 domain
    out = run(
        stack,
        "submit",
        *job_args("cli-fits", "--replica-count", "4", "--required-topology", "layer-3"),
        home=home,
    )
    # Then it is created and the decision is printed readably
    text = ok(out)
    assert text.startswith("submitted cli-fits for team team-a")
    assert re.search(r"^team\s+team-a$", text, re.M)
    assert re.search(r"^queue\s+hyperpod-ns-team-a/hyperpod-ns-team-a-localqueue$", text, re.M)
    assert re.search(r"^priority\s+experimentation-priority \(100\)$", text, re.M)
    assert re.search(r"^pods\s+4$", text, re.M)
    assert re.search(r"^topology\s+required layer-3$", text, re.M)
    flat = re.sub(r"\n {4,}", " ", text)  # a long value wraps under itself
    assert re.search(
        r"^why\s+required at layer-3: fits now in nn-\w+ \(\d+ of 4 nodes free; "
        r"Kueue's BestFit would pick it\); as of the node snapshot, changed \d+ (s|min|h) ago",
        flat,
        re.M,
    )
    assert re.search(
        r"^Kueue now\s+nn-\w+: i-\w+\.ec2\.internal, i-\w+\.ec2\.internal, i-\w+\.ec2\.internal and 1 more$",
        text,
        re.M,
    )
    assert re.search(r"^nvidia.com/gpu\s+32\s+256\s+64\s+\d+ -> \d+\s+640$", text, re.M)
    job = stack.kube().request("GET", "/apis/batch/v1/namespaces/hyperpod-ns-team-a/jobs/cli-fits").body
    assert job["spec"]["parallelism"] == 4  # (created suspended; Kueue unsuspends it once admitted)


def test_flags_become_the_api_request_with_numbers_as_numbers(stack, home):
    out = run(
        stack,
        "submit",
        "--job-name",
        "cli-flags",
        "--image",
        "pytorch:2.5",
        "--command",
        '["torchrun", "train.py"]',
        "--args=--epochs 10 --lr 3e-4",
        "--environment",
        "NCCL_DEBUG=INFO",
        "--environment",
        '{"A": "b=c"}',
        "--instance-type",
        "p5.48xlarge",
        "--node-count",
        "2",
        "--tasks-per-node",
        "8",
        "--accelerators",
        "8",
        "--vcpu",
        "16",
        "--memory",
        "64.5",
        "--efa",
        "4",
        "--priority",
        "training-priority",
        "--max-retry",
        "3",
        "--required-topology",
        "layer-2",
        "--fallback-after",
        "15m",
        "--dry-run",
        "--output",
        "json",
        home=home,
    )
    answer = json.loads(ok(out))
    d, manifest = answer["decision"], answer["job"]
    assert d["priority_class"] == "training-priority" and d["pods"] == 2
    assert d["topology"]["mode"] == "required" and d["topology"]["fallback_after_s"] == 900
    container = manifest["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["torchrun", "train.py"]
    assert container["args"] == ["--epochs", "10", "--lr", "3e-4"]
    assert {"name": "NCCL_DEBUG", "value": "INFO"} in container["env"]
    assert {"name": "A", "value": "b=c"} in container["env"]
    assert manifest["spec"]["backoffLimit"] == 3


def test_output_json_is_the_api_answer(stack, home):
    out = run(
        stack,
        "submit",
        *job_args("cli-json", "--replica-count", "2"),
        "--dry-run",
        "--output",
        "json",
        home=home,
    )
    answer = json.loads(ok(out))
    assert answer["dry_run"] is True and answer["created"] is False
    assert answer["decision"]["team"] == "team-a" and answer["job"]["metadata"]["name"] == "cli-json"


def test_a_dry_run_explains_and_creates_nothing(stack, home):
    before = in_flight_gpu(stack, home)
    out = run(stack, "submit", *job_args("cli-dry", "--replica-count", "4"), "--dry-run", home=home)
    text = ok(out)
    assert text.startswith(
        "dry run: cli-dry would be accepted for team team-a; nothing was created or charged"
    )
    assert re.search(rf"^nvidia.com/gpu\s+32\s+256\s+64\s+{before} -> {before + 32}\s+640$", text, re.M)
    assert (
        stack.kube().request("GET", "/apis/batch/v1/namespaces/hyperpod-ns-team-a/jobs/cli-dry").status == 404
    )
    assert in_flight_gpu(stack, home) == before
    missing = run(stack, "job", "cli-dry", "--team", "team-a", home=home)
    assert missing.returncode == 1 and "404 NOT_FOUND" in missing.stderr


def test_topology_auto_picks_the_tightest_level_and_says_why(stack, home):
    out = run(
        stack,
        "submit",
        *job_args("cli-auto", "--replica-count", "4"),
        "--topology",
        "auto",
        "--dry-run",
        home=home,
    )
    text = ok(out)
    assert re.search(r"^topology\s+preferred layer-3$", text, re.M)
    assert re.search(r"^why\s+auto: layer-3 is the tightest level", text, re.M)


def test_a_manifest_file_is_submitted_as_written(stack, home, tmp_path):
    # Given AWS's own topology-aware example Job as YAML
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(AWS_EXAMPLE), encoding="utf-8")
    # When it is submitted with -f
    text = ok(run(stack, "submit", "-f", path, home=home))
    # Then the decision keeps its priority and topology, and the Job is created as written
    assert text.startswith("submitted test-tas-job for team team-a")
    assert re.search(r"^priority\s+inference-priority \(1000\)$", text, re.M)
    assert re.search(r"^topology\s+required layer-3$", text, re.M)
    assert re.search(r"^pods\s+10$", text, re.M)
    created = (
        stack.kube().request("GET", "/apis/batch/v1/namespaces/hyperpod-ns-team-a/jobs/test-tas-job").body
    )
    assert created["spec"]["template"]["spec"]["containers"][0]["image"] == (
        "public.ecr.aws/docker/library/alpine:latest"
    )


def test_a_manifest_with_a_topology_flag(stack, home, tmp_path):
    manifest = copy.deepcopy(AWS_EXAMPLE)
    manifest["metadata"]["name"] = "tas-auto"
    del manifest["spec"]["template"]["metadata"]["annotations"]
    path = tmp_path / "job.json"
    path.write_text(json.dumps(manifest), encoding="utf-8")
    answer = json.loads(
        ok(run(stack, "submit", "-f", path, "--topology", "auto", "--dry-run", "--output", "json", home=home))
    )
    assert answer["decision"]["topology"]["mode"] in ("preferred", "none")
    assert "auto:" in answer["decision"]["topology"]["reason"]


def test_a_required_topology_that_can_never_fit_says_which_level_would(stack, home):
    out = run(
        stack,
        "submit",
        *job_args("cli-never", "--replica-count", "8", "--required-topology", "layer-3"),
        home=home,
    )
    assert out.returncode == 1, out.stdout + out.stderr
    # the headline (wrapped to the terminal: continuation lines indented by 4), then the details
    first, *details = re.sub(r"\n {4}(?=\S)", " ", out.stderr).splitlines()
    assert first.startswith("topogov submit: refused (422 TOPOLOGY_INFEASIBLE): no layer-3 domain")
    assert first.endswith("layer-2 would")
    assert "  largest domain holds: 4" in details
    assert "  tightest level that holds: layer-2" in details
    assert "  try: --required-topology layer-2, or --topology auto" in details
    assert out.stdout == ""


def test_a_priority_the_team_may_not_use_is_refused(stack, home):
    out = run(
        stack,
        "submit",
        *job_args("cli-prio"),
        "--priority",
        "inference-priority",
        profile="topogov-team-b",
        home=home,
    )
    assert out.returncode == 1
    assert (
        "refused (422 PRIORITY_NOT_ALLOWED): priority class 'inference-priority' is not allowed" in out.stderr
    )
    assert "  allowed: training-priority, experimentation-priority" in out.stderr.splitlines()


def test_the_in_flight_cap_refuses_with_used_asked_cap(stack, home):
    # Given team-c (cap 256 GPUs in flight), submitting 64-GPU jobs until refused
    codes, refused = [], None
    for i in range(8):
        out = run(
            stack,
            "submit",
            "--job-name",
            f"cli-cap-{i}",
            "--image",
            "x",
            "--accelerators",
            "8",
            "--replica-count",
            "8",
            profile="topogov-team-c",
            home=home,
        )
        codes.append(out.returncode)
        if out.returncode != 0:
            refused = out
            break
    # Then a few were accepted, and the refusal says used, asked and cap
    assert refused is not None and codes[:-1] and set(codes[:-1]) == {0}, codes
    assert refused.returncode == 1
    lines = refused.stderr.splitlines()
    assert lines[0].startswith("topogov submit: refused (429 IN_FLIGHT_LIMIT): team 'team-c' has ")
    assert "would pass its cap of 256" in lines[0]
    assert re.search(r"^\s+RESOURCE\s+USED\s+ASKED\s+CAP$", refused.stderr, re.M)
    row = re.search(r"^\s+nvidia.com/gpu\s+(\d+)\s+64\s+256$", refused.stderr, re.M)
    assert row and int(row.group(1)) + 64 > 256
    assert in_flight_gpu(stack, home, "team-c", "topogov-team-c") <= 256


@pytest.mark.parametrize(
    "argv",
    [
        [
            "submit",
            "--job-name",
            "x",
            "--image",
            "y",
            "--accelerators",
            "1",
            "--node-count",
            "1",
            "--replica-count",
            "2",
        ],
        ["submit", "--image", "y", "--accelerators", "1"],
        ["submit", "--job-name", "x", "--image", "y", "--accelerators", "eight"],
        ["submit", "--job-name", "x", "--image", "y", "--accelerators", "1", "--fallback-after", "15m"],
        ["submit", "--job-name", "x", "--image", "y", "--required-topology", "layer-3", "--topology", "auto"],
        ["submit", "-f", "job.yaml", "--image", "y"],
        ["submit", "--job-name", "x", "--image", "y", "--environment", "NOEQUALS"],
        ["jobs", "--output", "yaml"],
        ["job"],
        ["topology", "--kubeconfig", "k", "--endpoint", "http://127.0.0.1:1"],
        ["frobnicate"],
    ],
    ids=[
        "count-and-replicas",
        "no-job-name",
        "not-a-number",
        "fallback-alone",
        "two-topologies",
        "file-and-flags",
        "env-not-key-value",
        "bad-output",
        "job-without-name",
        "kubeconfig-and-endpoint",
        "unknown-command",
    ],
)
def test_bad_flags_are_usage_errors_in_one_line(stack, home, argv):
    out = run(stack, *argv, home=home)
    assert out.returncode == 2, out.stdout + out.stderr
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert out.stderr.startswith("topogov") and ": error: " in out.stderr


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["submit", "--jobname", "x"],
         "topogov submit: error: unrecognized argument --jobname: did you mean --job-name? "
         "(see 'topogov submit --help')"),
        (["submit", "--job-name", "x", "--replicas", "3", "--gpus", "8"],
         "topogov submit: error: unrecognized argument --replicas: did you mean --replica-count? "
         "(and --gpus) (see 'topogov submit --help')"),
        (["jobs", "--tema", "a"],
         "topogov jobs: error: unrecognized argument --tema: did you mean --team? "
         "(see 'topogov jobs --help')"),
        (["teams", "--zzz"],
         "topogov teams: error: unrecognized argument --zzz (see 'topogov teams --help')"),
    ],
)  # fmt: skip
def test_an_unknown_flag_names_the_command_and_the_closest_flag(stack, home, argv, line):
    out = run(stack, *argv, home=home)
    assert out.returncode == 2 and out.stderr.strip() == line, out.stderr


def test_version_names_the_installed_distributions(home):
    out = run(None, "--version", endpoint=False, home=home)
    assert out.returncode == 0 and re.fullmatch(
        r"topogov-cli [\w.]+(, topogov [\w.]+)?(, topogov-local [\w.]+)?\n", out.stdout
    )


def test_topology_with_nothing_to_read_says_what_it_tried(home, tmp_path):
    out = run(None, "topology", endpoint=False, home=home, cwd=tmp_path)
    assert out.returncode == 2, out.stdout + out.stderr
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith("topogov topology: nothing to read the topology from: no API endpoint (--endpoint")
    assert (
        "./.topogov/local/endpoints.json" in line and "$KUBECONFIG" in line and "run `topogov local`" in line
    )


def test_no_endpoint_anywhere_is_a_usage_error(stack, home):
    out = run(stack, "jobs", endpoint=False, home=home)
    assert out.returncode == 2 and "no API endpoint" in out.stderr and "TOPOGOV_ENDPOINT" in out.stderr


# -- reaching the API ------------------------------------------------------------------------------------
def test_an_unreachable_endpoint_exits_3(stack, home):
    dead = f"http://127.0.0.1:{free_port()}"
    out = run(stack, "jobs", "--endpoint", dead, home=home)
    assert out.returncode == 3
    assert out.stderr.strip() == (
        f"topogov jobs: cannot reach the Topogov API at {dead} (connection refused; endpoint from --endpoint)"
    )


def test_an_unknown_profile_exits_3(stack, home):
    out = run(stack, "teams", profile="topogov-nobody", home=home)
    assert out.returncode == 3
    assert out.stderr.startswith("topogov teams: not authenticated:") and "topogov-nobody" in out.stderr


def test_keys_the_gateway_does_not_know_exit_3(stack, home, tmp_path):
    creds = tmp_path / "credentials"
    creds.write_text(
        "[stranger]\naws_access_key_id = AKIAIOSFODNN7EXAMPLE\n"
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n"
    )
    out = run(stack, "jobs", profile="stranger", home=home, AWS_SHARED_CREDENTIALS_FILE=creds)
    assert out.returncode == 3
    assert out.stderr.startswith(
        "topogov jobs: not authenticated: The security token included in the request"
    )


def test_no_credentials_at_all_exit_3(stack, home):
    out = run(
        stack,
        "jobs",
        profile=None,
        home=home,
        AWS_SHARED_CREDENTIALS_FILE=home / "none",
        AWS_CONFIG_FILE=home / "none",
    )
    assert out.returncode == 3 and "no AWS credentials found" in out.stderr


def test_the_flag_beats_the_environment(stack, home):
    dead = f"http://127.0.0.1:{free_port()}"
    out = run(stack, "teams", "--endpoint", stack.api.url, home=home, TOPOGOV_ENDPOINT=dead)
    assert "team-a" in ok(out)


def test_the_endpoint_from_endpoints_json_after_topogov_local(stack, home):
    # Given the directory `topogov local` ran in (it holds .topogov/local/endpoints.json)
    workdir = stack.dir.parent.parent
    assert json.loads((workdir / ".topogov/local/endpoints.json").read_text())["api"] == stack.api.url
    # When a data scientist runs the CLI there with the README's environment and no endpoint
    out = run(
        stack,
        "teams",
        endpoint=False,
        cwd=workdir,
        home=home,
        AWS_SHARED_CREDENTIALS_FILE=".topogov/local/aws-credentials",
    )
    # Then it found the API
    assert re.search(r"^team-a  namespace hyperpod-ns-team-a,", ok(out), re.M)


def test_the_endpoint_and_region_from_a_config_file(stack, home, tmp_path):
    good = tmp_path / "config.toml"
    good.write_text(f'endpoint = "{stack.api.url}/"\nregion = "us-east-1"\n', encoding="utf-8")
    assert "team-a" in ok(run(stack, "teams", endpoint=False, home=home, TOPOGOV_CONFIG=good))
    # the region is the config file's: signed for another region, the gateway refuses the scope
    other = tmp_path / "other.toml"
    other.write_text(f'endpoint = "{stack.api.url}"\nregion = "eu-west-1"\n', encoding="utf-8")
    out = run(stack, "teams", endpoint=False, home=home, TOPOGOV_CONFIG=other)
    assert out.returncode == 3 and "not authenticated" in out.stderr
    # and ~/.config/topogov/config.toml is the default file
    (home / ".config" / "topogov").mkdir(parents=True, exist_ok=True)
    (home / ".config" / "topogov" / "config.toml").write_text(good.read_text(), encoding="utf-8")
    try:
        assert "team-a" in ok(run(stack, "teams", endpoint=False, home=home))
    finally:
        (home / ".config" / "topogov" / "config.toml").unlink()


# -- jobs, job, cancel, teams ------------------------------------------------------------------------------
def test_list_show_and_cancel_a_job(stack, home):
    hold_queue(stack, "hyperpod-ns-team-a-clusterqueue")
    try:
        _list_show_and_cancel(stack, home)
    finally:
        hold_queue(stack, "hyperpod-ns-team-a-clusterqueue", "None")


def _list_show_and_cancel(stack, home):
    # Given a submitted job
    ok(
        run(
            stack,
            "submit",
            *job_args("cli-flow", "--replica-count", "1", "--preferred-topology", "layer-3"),
            home=home,
        )
    )
    used = in_flight_gpu(stack, home)
    # Then `jobs` lists it in a table
    table = ok(run(stack, "jobs", home=home))
    assert re.match(r"NAME\s+TEAM\s+STATUS\s+CHARGE\s+PRIORITY\s+TOPOLOGY\s+PLACEMENT\s+ETA\s+AGE\n", table)
    # with the status `job` shows (one vocabulary) and the charge
    assert re.search(
        r"^cli-flow\s+team-a\s+Pending\s+held\s+experimentation\s+preferred layer-3\s+-\s+\?\s+"
        r"\d+[smhd]$",
        table,
        re.M,
    )
    assert any(
        j["name"] == "cli-flow"
        for j in json.loads(ok(run(stack, "jobs", "--output", "json", home=home)))["jobs"]
    )
    # and `job` shows it pending, Kueue's reason, and the placement decision (the team is the caller's
    # only one; its queue is stopped for this test, so Kueue admits nothing)
    shown = wait_until(
        lambda: (t := ok(run(stack, "job", "cli-flow", home=home))) and "why pending" in t and t,
        "Kueue's reason",
    )
    assert re.search(r"^status\s+Pending$", shown, re.M)
    assert re.search(r"^why pending\s+ClusterQueue hyperpod-ns-team-a-clusterqueue is inactive$", shown, re.M)
    assert re.search(r"^charge\s+in-flight charge held", shown, re.M)
    assert re.search(r"^topology\s+preferred layer-3$", shown, re.M)
    # and no start estimate while its queue is stopped, saying why
    assert re.search(
        r"^estimate\n  start      none: ClusterQueue hyperpod-ns-team-a-clusterqueue is stopped", shown, re.M
    ), shown
    assert "events" in shown and "submitted" in shown
    # When it is cancelled
    out = run(stack, "cancel", "cli-flow", home=home)
    assert ok(out).strip() == "cancelled cli-flow (team team-a): Job deleted; in-flight charge released"
    # Then its charge is released, once, and `job` says so
    assert in_flight_gpu(stack, home) == used - 8
    shown = ok(run(stack, "job", "cli-flow", home=home))
    assert re.search(r"^status\s+Cancelled$", shown, re.M)
    assert re.search(r"^charge\s+in-flight charge released \(ledger state released\)$", shown, re.M)
    again = ok(run(stack, "cancel", "cli-flow", home=home))
    assert "already been released" in again
    assert in_flight_gpu(stack, home) == used - 8


def test_another_teams_job_is_refused_and_an_admin_names_the_team(stack, home):
    ok(run(stack, "submit", *job_args("cli-owned", "--replica-count", "1"), home=home))
    out = run(stack, "job", "cli-owned", "--team", "team-a", profile="topogov-team-b", home=home)
    assert out.returncode == 1 and "refused (403 FORBIDDEN)" in out.stderr
    # an admin sees every team: the job is found among them
    view = json.loads(
        ok(run(stack, "job", "cli-owned", "--output", "json", profile="topogov-admin", home=home))
    )
    assert view["team"] == "team-a" and view["status"] in ("Pending", "Admitted", "Running")


def test_teams_shows_a_row_and_a_bar_per_resource(stack, home):
    text = ok(run(stack, "teams", home=home))
    assert text.startswith("bar = quota + borrow limit:  # admitted by Kueue")
    assert re.search(
        r"^team-a  namespace hyperpod-ns-team-a, queue hyperpod-ns-team-a-localqueue$", text, re.M
    )
    assert re.search(
        r"^  priorities  inference-priority, training-priority, "
        r"experimentation-priority \(default\)$",
        text,
        re.M,
    )
    assert re.search(r"^  RESOURCE\s+QUOTA\s+BORROW\s+ADMITTED\s+IN FLIGHT\s+CAP$", text, re.M)
    gpu = re.search(r"^  nvidia.com/gpu\s+256\s+\+64\s+(\d+)\s+(\d+)\s+640\s+\[([#\-.:>]{24})\]$", text, re.M)
    assert gpu, text
    _admitted, in_flight, bar = gpu.groups()
    # in flight: admitted by Kueue (#) or queued (-)
    assert ("#" in bar or "-" in bar) == (int(in_flight) > 0) and bar.endswith(":")
    assert re.search(r"^  memory\s+60Ti\s+\+15Ti\s+\S+\s+\S+\s+150Ti\s+\[[#\-.:>]{24}\]$", text, re.M)
    assert max(len(line) for line in text.splitlines()) <= 100
    views = json.loads(ok(run(stack, "teams", "--output", "json", home=home)))["teams"]
    assert [v["team"] for v in views] == ["team-a"]


def test_an_idempotency_key_retry_returns_the_same_job_and_charges_once(stack, home):
    used = in_flight_gpu(stack, home)
    argv = [
        "submit",
        *job_args("cli-idem", "--replica-count", "1"),
        "--idempotency-key",
        "cli-k-1",
        "--output",
        "json",
    ]
    first, retry = ok(run(stack, *argv, home=home)), ok(run(stack, *argv, home=home))
    assert json.loads(first) == json.loads(retry)
    assert json.loads(first)["job"]["metadata"]["name"] == "cli-idem"
    assert in_flight_gpu(stack, home) == used + 8
    plain = run(stack, *argv[:-4], home=home)  # the same name without the key: a new submission
    assert plain.returncode == 1 and "409 CONFLICT" in plain.stderr


# -- topology -----------------------------------------------------------------------------------------
def test_topology_from_the_api_as_mermaid_and_json(stack, home):
    mermaid = ok(run(stack, "topology", home=home))
    assert mermaid.startswith("flowchart TD\n") and "Layer 4:" in mermaid
    doc = json.loads(ok(run(stack, "topology", "--format", "json", home=home)))
    assert doc["depth"] == 4 and "generated_at" in doc  # the API's snapshot, not the node labels
    assert json.loads(ok(run(stack, "topology", "--output", "json", home=home)))["depth"] == 4


def test_topology_svg_with_or_without_graphviz(stack, home, tmp_path):
    target = tmp_path / "topology.svg"
    out = run(stack, "topology", "--format", "svg", "--out", target, home=home)
    if shutil.which("dot"):
        ok(out)
        svg = target.read_text(encoding="utf-8")
        assert "<svg" in svg and "Layer 1: nn&#45;" in svg  # Graphviz escapes the hyphen
    else:
        assert out.returncode == 2 and "Graphviz" in out.stderr and not target.exists()
    # without `dot` on PATH, always: one clear line, exit 2, and no API call needed
    empty = tmp_path / "empty-path"
    empty.mkdir()
    out = run(stack, "topology", "--format", "svg", home=home, PATH=empty)
    assert out.returncode == 2 and out.stdout == ""
    assert len(out.stderr.strip().splitlines()) == 1
    assert "--format svg needs Graphviz's `dot`, which is not on PATH" in out.stderr


def test_topology_from_node_labels_with_a_kubeconfig(stack, home):
    out = run(stack, "topology", "--kubeconfig", stack.kubeconfig, "--format", "json", home=home)
    doc = json.loads(ok(out))
    assert doc["depth"] == 4 and "generated_at" not in doc


# -- the pieces the output is made of (no stack) ---------------------------------------------------
def test_bars_follow_the_legend():
    from topogov_cli.teams import bar

    assert bar(20, 10, 0, 0, width=30) == "[" + "." * 20 + ":" * 10 + "]"
    assert bar(20, 10, 10, 5, width=30) == "[" + "#" * 5 + "-" * 5 + "." * 10 + ":" * 10 + "]"
    assert bar(20, 10, 25, 25, width=30) == "[" + "#" * 25 + ":" * 5 + "]"  # borrowing
    assert bar(20, 10, 60, 0, width=30) == "[" + "-" * 29 + ">]"  # in flight beyond quota + borrow
    assert bar(256, 64, 1, 0)[1] == "-"  # a little is still visible
    assert bar(0, 0, 0, 0, width=4) == "[    ]"


def test_command_and_args_take_a_json_list_or_shell_words():
    from topogov_cli.submit import env_pairs, words

    assert words('["python", "train.py"]') == ["python", "train.py"]
    assert words("[python, train.py]") == ["python", "train.py"]
    assert words("python 'my script.py' --epochs 10") == ["python", "my script.py", "--epochs", "10"]
    assert env_pairs("A=b=c") == {"A": "b=c"} and env_pairs('{"X": "1"}') == {"X": "1"}


def test_doctor_checks_each_part_and_says_what_is_wrong(stack, home, tmp_path):
    out = run(stack, "doctor", "--kubeconfig", str(stack.kubeconfig), home=home)
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    kueue = [
        "Kueue Topologies",
        "Kueue ResourceFlavors",
        "Kueue ClusterQueues",
        "Kueue WorkloadPriorityClasses",
    ]
    for what in ["endpoint", "credentials", "API", "cluster", "topology labels", *kueue]:
        assert any(re.match(rf"^ok\s+{re.escape(what)}\s", line) for line in lines), (what, out.stdout)
    assert re.search(r"^ok\s+API\s+answers as you; your teams: team-a$", out.stdout, re.M)
    assert re.search(r"^ok\s+topology labels\s+(\d+) of \1 GPU nodes labelled$", out.stdout, re.M)
    # the local stack's one HyperPod node of another cluster (no task governance add-on here)
    assert re.search(r"^ok\s+HyperPod\s+1 HyperPod node\(s\); no namespace labelled", out.stdout, re.M)
    # the Kueue the cluster runs, where that was learnt, what it serves and the model answering for it
    assert re.search(
        r"^ok\s+Kueue\s+v0\.17\.0 \(from the Kueue Deployment's image "
        r"registry\.k8s\.io/kueue/kueue:v0\.17\.0\); serves v1beta2, v1beta1, Topogov uses v1beta2; "
        r"model profile Kueue v0\.17\.0 \(the model's profile\)$",
        out.stdout,
        re.M,
    ), out.stdout
    assert lines[-1] == "11 of 11 checks passed"
    # a profile the API does not know: the credentials resolve, the API refuses, doctor says so, exit 1
    bad = run(stack, "doctor", profile="nobody", home=home, cwd=tmp_path)
    assert bad.returncode == 1 and re.search(r"^FAIL\s+credentials\s+not authenticated", bad.stdout, re.M)
    assert bad.stdout.splitlines()[-1].endswith("failed")


def test_completion_scripts_complete_commands_flags_and_choices(home):
    script = run(None, "completion", "bash", endpoint=False, home=home).stdout
    assert script.startswith("# topogov completion") and "complete -o default -F _topogov topogov" in script

    def complete(*words):
        probe = f'source /dev/stdin <<<"$S"; COMP_WORDS=({" ".join(words)}); COMP_CWORD={len(words) - 1}; '
        env = {"S": script, "PATH": os.environ["PATH"]}
        out = subprocess.run(
            ["bash", "-c", probe + '_topogov; echo "${COMPREPLY[@]}"'],
            env=env,
            capture_output=True,
            text=True,
        )
        return out.stdout.split()

    assert complete("topogov", "sub") == ["submit"]
    assert complete("topogov", "submit", "--req") == ["--required-topology"]
    assert complete("topogov", "jobs", "--output", '""') == ["text", "json"]
    assert "zsh" in run(None, "completion", "zsh", endpoint=False, home=home).stdout.split("\n")[0] or (
        run(None, "completion", "zsh", endpoint=False, home=home).stdout.startswith(
            "autoload -U +X bashcompinit"
        )
    )
