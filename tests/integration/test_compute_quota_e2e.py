"""Compute Engine's quotas are its own, through the real controller against the emulator and
the real CLI (``quota --json``, ``plan``) in subprocesses:

- a ``quotas:`` entry with ``api: compute`` counts Compute Engine's VMs only, and the TPU
  API's limit of the same family and place does not hold a Compute Engine create back;
- a create Compute Engine refused (``QUOTA_EXCEEDED``, ``Quota 'PREEMPTIBLE_TPU_V6E'
  exceeded. Limit: 4.0 in region us-central1.``) is matched to that API's limit, and goes
  again once the file says the granted higher limit; a create past it waits in that API's
  words.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from tests.fixtures.setup_world import SetupWorld
from tests.support.cli import clean_env, run_cli

pytestmark = pytest.mark.integration

ZONE = "us-central1-c"
REGION = "us-central1"


def slot(name: str, accelerator: str = "v6e-4") -> str:
    return (
        f"  - {{name: {name}, zone: {ZONE}, accelerator: {accelerator}, api: compute, "
        "mode: spot, want: held}\n"
    )


def compute_quota(chips: int) -> str:
    return (
        "quotas:\n"
        f"  - {{family: v6e, mode: spot, region: {REGION}, chips: {chips}, api: compute}}\n"
        f"  - {{family: v6e, mode: spot, region: {REGION}, chips: 0, api: tpu}}\n"
    )


def status(world: SetupWorld, name: str) -> str | None:
    vm = world.harness.emulator.compute.instance(ZONE, name)
    return None if vm is None else str(vm["status"])


def inserts(world: SetupWorld, name: str) -> list[Any]:
    return [
        r
        for r in world.harness.emulator.requests()
        if r.key == "POST compute.instances.insert" and (r.body or {}).get("name") == name
    ]


def quota_of(world: SetupWorld, name: str) -> dict[str, Any]:
    row = next((s for s in world.snapshot()["slots"] if s["name"] == name), {})
    return row.get("quota") or {}


def cli(world: SetupWorld, *argv: str) -> str:
    base = ("-f", str(world.harness.path), "--state-dir", str(world.state.root))
    done = run_cli(*base, *argv, env=clean_env(world.harness.env))
    assert done.returncode in (0, 2), done.stderr
    return done.stdout


async def test_compute_engines_quota_is_its_own_and_a_raised_limit_lifts_its_refusal(
    cloud_world: Callable[..., SetupWorld],
) -> None:
    world = cloud_world()
    emu = world.harness.emulator
    emu.compute.set_quota("v6e", "preemptible", REGION, 4)
    body = "slots:\n" + slot("a") + slot("b")
    world.write(world.desired(body, poll_interval="0.2s"))
    await world.start()
    # the two creates go out together: whichever reaches the cloud second is the refused one
    running = ("a", "b")
    await world.until(
        "one RUNNING", lambda: "RUNNING" in [status(world, n) for n in running], timeout=30
    )
    held = "a" if status(world, "a") == "RUNNING" else "b"
    other = "b" if held == "a" else "a"
    await world.until(f"{other} refused", lambda: quota_of(world, other).get("state") == "refused")
    refused = quota_of(world, other)
    assert (refused["quota_id"], refused["limit"], refused["api"]) == (
        "PREEMPTIBLE_TPU_V6E",
        4,
        "compute",
    )
    # the grant: Compute Engine's limit raised, and said in the file; the TPU API's limit of
    # the same family and region (0) is another API's and holds nothing back
    emu.compute.set_quota("v6e", "preemptible", REGION, 8)
    world.write(world.desired(compute_quota(8) + body, poll_interval="0.2s"))
    await world.until(f"{other} RUNNING", lambda: status(world, other) == "RUNNING", timeout=30)
    assert len(inserts(world, other)) == 2
    doc = json.loads(cli(world, "quota", "--json"))
    by_api = {q["api"]: q for q in doc["quotas"]}
    assert (by_api["compute"]["used"], by_api["compute"]["chips"]) == (8, 8)
    assert (by_api["tpu"]["used"], by_api["tpu"]["chips"]) == (0, 0)

    # a third slot: it waits under Compute Engine's limit, in its words
    world.write(world.desired(compute_quota(8) + body + slot("c"), poll_interval="0.2s"))
    wait = "waiting for quota: 8/8 spot v6e chips in us-central1 on Compute Engine"
    await world.until("c waits", lambda: quota_of(world, "c").get("message") == wait)
    assert inserts(world, "c") == []
    await world.stop()
    assert wait in cli(world, "plan")
