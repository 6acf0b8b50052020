"""Single-host TPU VMs held through Compute Engine by the real controller, against the
emulator: held, preempted both ways and asked for again, a stockout lost to a race elsewhere,
a quota refusal that waits, flex-start's queue, run and end.

Every exchange the controller had with the emulator's Compute Engine routes is decoded with
the google-cloud-compute SDK's message classes at the end of each test (unknown fields
refused): what the adapter sends is what the real API reads.
"""

from __future__ import annotations

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
