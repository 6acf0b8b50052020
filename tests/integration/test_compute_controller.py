"""Single-host TPU VMs held through Compute Engine by the real controller, against the
emulator: held, preempted both ways and asked for again, a stockout lost to a race elsewhere,
a quota refusal that waits, flex-start's queue, run and end.

Every exchange the controller had with the emulator's Compute Engine routes is decoded with
the google-cloud-compute SDK's message classes at the end of each test (unknown fields
refused): what the adapter sends is what the real API reads.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from tests.fixtures.setup_world import SetupWorld
from tests.support.compute_sdk import decode_all

pytestmark = pytest.mark.integration

ZONE = "us-central1-c"
OTHER = "us-central1-a"
REGION = "us-central1"


def compute_world(cloud_world: Callable[..., SetupWorld], **options: Any) -> SetupWorld:
    return cloud_world(record_responses=True, **options)


def slot(name: str, zone: str = ZONE, extra: str = "", **keys: str) -> str:
    lines = [f"  - name: {name}", f"    zone: {zone}"]
    lines += [f"    {k}: {v}" for k, v in keys.items()]
    lines += [f"    {line}" for line in extra.splitlines() if line.strip()]
    return "\n".join(lines) + "\n"


def instance(world: SetupWorld, name: str, zone: str = ZONE) -> dict[str, Any] | None:
    found: dict[str, Any] | None = world.harness.emulator.compute.instance(zone, name)
    return found


def status(world: SetupWorld, name: str, zone: str = ZONE) -> str | None:
    vm = instance(world, name, zone)
    return None if vm is None else str(vm["status"])


def decoded(world: SetupWorld) -> int:
    """Every Compute Engine exchange of the test, decoded with the SDK (the count)."""
    return decode_all(world.harness.emulator.requests())


def inserts(world: SetupWorld, name: str | None = None) -> list[Any]:
    return [
        r
        for r in world.harness.emulator.requests()
        if r.key == "POST compute.instances.insert"
        and (name is None or (r.body or {}).get("name") == name)
    ]


async def test_spot_single_hosts_are_held_and_asked_for_again_after_either_preemption(
    cloud_world: Callable[..., SetupWorld],
) -> None:
    world = compute_world(cloud_world)
    emu = world.harness.emulator
    # b: a managed spot VM whose termination action is STOP (made by an older version, say)
    emu.compute.add_instance(
        ZONE,
        "b",
        "ct6e-standard-4t",
        action="STOP",
        labels={
            "managed-by": "tpu-reconciler",
            "tpu-reconciler-slot": "b",
            "tpu-accelerator": "v6e-4",
        },
    )
    world.write(
        world.desired(
            "slots:\n"
            + slot("a", accelerator="tpu7x-8", mode="spot", want="held")
            + slot(
                "b",
                machine_type="ct6e-standard-4t",
                topology="2x2",
                api="compute",
                mode="spot",
                want="held",
            )
        )
    )
    await world.start()
    await world.until("a RUNNING", lambda: status(world, "a") == "RUNNING")
    await world.until("both ACTIVE", lambda: {world.slot(n)["state"] for n in "ab"} == {"RUNNING"})
    row = world.slot("a")
    assert (row["node_state"], row["accelerator"]) == ("READY", "tpu7x-8")
    body = inserts(world, "a")[0].body
    assert body["machineType"] == f"zones/{ZONE}/machineTypes/tpu7x-standard-4t"
    assert body["scheduling"] == {
        "provisioningModel": "SPOT",
        "instanceTerminationAction": "DELETE",
        "onHostMaintenance": "TERMINATE",
        "automaticRestart": False,
    }
    assert body["disks"][0]["initializeParams"]["diskType"].endswith("/hyperdisk-balanced")
    assert body["labels"]["managed-by"] == "tpu-reconciler"
    assert inserts(world, "b") == []  # b was adopted as it was

    # a: DELETE action, the VM is gone; b: STOP action, the VM stays TERMINATED
    first_a = instance(world, "a")["id"]  # type: ignore[index]
    emu.compute.preempt(ZONE, "a")
    emu.compute.preempt(ZONE, "b")
    await world.until(
        "both back",
        lambda: (
            status(world, "a") == "RUNNING"
            and instance(world, "a")["id"] != first_a  # type: ignore[index]
            and status(world, "b") == "RUNNING"
            and len(inserts(world, "b")) == 1
        ),
        timeout=30,
    )
    assert len(inserts(world, "a")) == 2
    preempted = world.events("qr.state", slot="a", after="DELETED")
    assert preempted, world.events("qr.state", slot="a")
    assert world.events("action.started", slot="b", action="replace")
    assert inserts(world, "b")[0].body["scheduling"]["instanceTerminationAction"] == "DELETE"
    await world.stop()
    assert decoded(world) > 10


async def test_a_stockout_in_one_zone_loses_the_race_to_another(
    cloud_world: Callable[..., SetupWorld],
) -> None:
    world = compute_world(cloud_world)
    emu = world.harness.emulator
    emu.compute.set_capacity(ZONE, "tpu7x-standard-4t", 0)
    world.write(
        world.desired(
            "slots:\n"
            + slot("east", accelerator="tpu7x-8", mode="spot")
            + slot("west", zone=OTHER, accelerator="tpu7x-8", mode="spot")
            + "race_groups:\n  - {name: g, count: 1, slots: [east, west]}\n"
        )
    )
    await world.start()
    await world.until("west RUNNING", lambda: status(world, "west", OTHER) == "RUNNING")
    await world.until("the race closed", lambda: world.slot("west")["state"] == "RUNNING")
    await asyncio.sleep(1.0)  # passes go by: the race stays won, east is not asked again
    assert instance(world, "east") is None
    assert len(inserts(world, "east")) == 1 and len(inserts(world, "west")) == 1
    assert world.slot("east")["state"] in ("NOT_QUEUED", None, "-")
    await world.stop()
    decoded(world)


async def test_a_quota_refusal_waits_for_quota_without_a_loop(
    cloud_world: Callable[..., SetupWorld],
) -> None:
    world = compute_world(cloud_world)
    emu = world.harness.emulator
    emu.compute.set_quota("v6e", "preemptible", REGION, 0)
    world.write(
        world.desired(
            "slots:\n" + slot("q", accelerator="v6e-4", api="compute", mode="spot", want="held"),
            poll_interval="0.2s",
        )
    )
    await world.start()
    await world.until(
        "the refusal read back",
        lambda: "PREEMPTIBLE_TPU_V6E" in (world.slot("q").get("last_error") or ""),
        timeout=20,
    )
    await asyncio.sleep(2.0)  # ten passes: nothing is sent again
    assert len(inserts(world, "q")) == 1
    failed = world.events("action.failed", slot="q")
    assert failed and "QUOTA_EXCEEDED" in failed[-1]["error"], failed
    plan = world.snapshot()
    assert "quota" in str(plan), plan
    emu.compute.set_quota("v6e", "preemptible", REGION, None)
    world.write(
        world.desired(
            "slots:\n"
            + slot(
                "q", accelerator="v6e-4", api="compute", mode="spot", want="held", valid_until="6h"
            ),
            poll_interval="0.2s",
        )
    )  # the intent changed: a new decision, sent at once
    await world.until("q RUNNING", lambda: status(world, "q") == "RUNNING", timeout=20)
    assert len(inserts(world, "q")) == 2
    await world.stop()
    decoded(world)


async def test_flex_start_queues_runs_and_ends_without_counting_as_a_preemption(
    cloud_world: Callable[..., SetupWorld],
) -> None:
    world = compute_world(cloud_world)
    emu = world.harness.emulator
    emu.compute.set_capacity(ZONE, "tpu7x-standard-4t", 0)
    world.write(
        world.desired(
            "slots:\n"
            + slot(
                "f", accelerator="tpu7x-8", mode="flex-start", max_run_duration="60s", want="held"
            )
        )
    )
    await world.start()
    await world.until("f PENDING", lambda: status(world, "f") == "PENDING")
    await world.until("f waiting", lambda: world.slot("f")["state"] == "PENDING")
    body = inserts(world, "f")[0].body
    assert body["scheduling"]["provisioningModel"] == "FLEX_START"
    assert body["scheduling"]["maxRunDuration"] == {"seconds": "60"}
    assert body["scheduling"]["instanceTerminationAction"] == "STOP"
    assert body["params"] == {"requestValidForDuration": {"seconds": str(7 * 86400)}}
    emu.compute.set_capacity(ZONE, "tpu7x-standard-4t", 1)
    await world.until("f RUNNING", lambda: world.slot("f")["state"] == "RUNNING", timeout=20)
    await world.until("the run ended", lambda: status(world, "f") == "TERMINATED", timeout=20)
    await world.until("f ended", lambda: world.slot("f").get("request") == "ended", timeout=20)
    assert world.slot("f")["expired"] is True
    await asyncio.sleep(1.0)
    assert len(inserts(world, "f")) == 1  # not asked for again: renew is not set
    assert not world.events("action.started", slot="f", action="replace")
    states = [e["after"] for e in world.events("qr.state", slot="f")]
    assert states[-1] == "TERMINATED" and "DELETED" not in states
    await world.stop()
    decoded(world)


async def test_two_mig_slices_are_one_slot_replaced_whole(
    cloud_world: Callable[..., SetupWorld],
) -> None:
    world = compute_world(cloud_world)
    emu = world.harness.emulator
    world.write(
        world.desired(
            "slots:\n" + slot("m", accelerator="tpu7x-16", mode="spot", slices="2", want="held")
        )
    )
    await world.start()
    await world.until("m ACTIVE", lambda: world.slot("m")["state"] == "ACTIVE", timeout=20)
    row = world.slot("m")
    assert [(s["node"], s["state"], s["workers"]) for s in row["slices"]] == [
        ("m-0", "READY", 2),
        ("m-1", "READY", 2),
    ]
    assert len(emu.compute.templates()) == len(emu.compute.policies()) == 1
    before = {g["id"] for g in emu.compute.groups()}
    emu.compute.preempt_member(ZONE, "m-1", 1)
    await world.until(
        "both slices made again",
        lambda: (
            len(emu.compute.groups()) == 2
            and not before & {g["id"] for g in emu.compute.groups()}
            and world.slot("m")["state"] == "ACTIVE"
        ),
        timeout=30,
    )
    assert len(world.events("action.started", slot="m", action="replace")) == 1
    await world.stop()
    decoded(world)
