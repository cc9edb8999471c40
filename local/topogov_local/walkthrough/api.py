"""Walkthrough, part 3: the governance API says no, clearly, before anything is created."""

from __future__ import annotations

import concurrent.futures as cf
from typing import Any

from topogov_local.walkthrough.console import Console

GPU_JOB = ("--image", "pytorch:2.5", "--accelerators", "8", "--efa", "32")


def refusals(c: Console) -> None:
    import requests

    c.step(8, f"The governance API on {c.stack.api.url}: SigV4-signed, identity from the request context")
    c.note(
        "Commands below run as the AWS profile in brackets (AWS_PROFILE=topogov-team-a, from "
        f"{c.stack.credentials.name} in the stack's directory); each refusal names the field and the "
        "reason, and creates and charges nothing."
    )
    c.say("8 pods x 8 GPUs required in one layer-3 domain (4 nodes each) can never fit:")
    c.topogov("topogov-team-a", "submit", "--job-name", "too-wide", *GPU_JOB, "--replica-count", "8",
              "--required-topology", "layer-3")  # fmt: skip
    c.say("team-b asks for inference-priority, which its policy does not allow:")
    c.topogov("topogov-team-b", "submit", "--job-name", "sneaky", *GPU_JOB,
              "--priority", "inference-priority")  # fmt: skip
    c.say("--topology auto, as a dry run (decided and explained; nothing created or charged):")
    c.topogov("topogov-team-a", "submit", "--job-name", "auto-dry", *GPU_JOB, "--replica-count", "12",
              "--topology", "auto", "--dry-run")  # fmt: skip
    unsigned = requests.get(f"{c.stack.api.url}/v1/teams", timeout=10)
    c.say(f"An unsigned request: {unsigned.status_code} {unsigned.json()}")


def burst(c: Console, n_step: int) -> None:
    _, team = c.api("topogov-team-c", "GET", "/v1/teams/team-c")
    cap, before = team["max_in_flight"]["nvidia.com/gpu"], team["in_flight"]["nvidia.com/gpu"]
    n = (cap - before) // 8 + 8
    c.step(n_step, f"A burst: {n} concurrent 8-GPU submissions from team-c against its cap of {cap} GPUs")
    c.note(
        "The cap counts queued and running requests and is checked atomically per submission "
        "(a conditional DynamoDB write), so concurrent requests cannot pass it together:"
    )

    def submit(i: int) -> int:
        body: dict[str, Any] = {"job_name": f"burst-{i}", "image": "pytorch:2.5", "accelerators": 8,
                                "command": ["sleep", "5"]}  # fmt: skip
        return c.api("topogov-team-c", "POST", "/v1/jobs", body)[0]

    with cf.ThreadPoolExecutor(max_workers=16) as pool:
        codes = list(pool.map(submit, range(n)))
    _, after = c.api("topogov-team-c", "GET", "/v1/teams/team-c")
    used = after["in_flight"]["nvidia.com/gpu"]
    c.say(
        f"  -> {codes.count(201)} x 201, {codes.count(429)} x 429; in flight {before} -> {used} of {cap} GPUs"
    )
    c.note(
        "Kueue runs them as team-c's quota allows (team-c lends but never borrows), a few at a time; "
        "the ledger gives each charge back at the first pass after its job finishes."
    )
