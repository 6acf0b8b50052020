"""``setup.at_boot`` on Compute Engine through the real controller and the emulator.

A single-host TPU VM carries the setup in its instance's ``metadata.items``, a MIG slice in its
instance template's (every host is made from it); each host reports in its own guest
attributes (``instances.getGuestAttributes``), which the test writes as a booted host's
script would (no VM boots here). The controller reads them host by host and shows the slot set
up, without setup over SSH. Every exchange is decoded with the google-cloud-compute SDK's own
message classes (unknown fields refused).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from reconciler.model.boot_script import boot_generation
from tests.fixtures.setup_world import SetupWorld
from tests.support.compute_sdk import decode_all

pytestmark = pytest.mark.integration

ZONE = "us-central1-c"
HOSTS = 16


def items(resource: dict[str, Any] | None) -> dict[str, str]:
    assert resource is not None
    meta = resource.get("properties", resource)["metadata"]
    return {i["key"]: i["value"] for i in meta.get("items", [])}


def setup_of(world: SetupWorld, slot: str) -> dict[str, Any]:
    setup: dict[str, Any] = world.slot(slot)["setup"]
    return setup


async def test_a_vm_and_a_slice_boot_with_their_setup_and_each_host_reports(
    cloud_world: Callable[..., SetupWorld],
) -> None:
    world = cloud_world(record_responses=True)
    emu = world.harness.emulator
    world.harness.path.with_name("setup.sh").write_text("#!/bin/sh\necho ready\n")
    boot = "{at_boot: true, generation: 2}"
    world.write(
        world.desired(
            "slots:\n"
            + "".join(
                f"  - {{name: {name}, zone: {ZONE}, accelerator: {accelerator}, mode: spot,\n"
                f"     want: held, setup: {boot}}}\n"
                for name, accelerator in (("one", "tpu7x-8"), ("big", "tpu7x-128"))
            ),
            settings="setup_scripts: [setup.sh]",
        )
    )
    await world.start()
    await world.until(
        "both READY",
        lambda: [world.slot(n)["node_state"] for n in ("one", "big")] == ["READY", "READY"],
        timeout=40,
    )
    vm = items(emu.compute.instance(ZONE, "one"))
    assert boot_generation(vm["startup-script"]) == 2 and "01-setup.sh" in vm["startup-script"]
    assert (vm["enable-guest-attributes"], vm["tpu-worker-id"]) == ("TRUE", "0")
    [template] = emu.compute.templates()
    assert items(template)["startup-script"] == vm["startup-script"].replace("=one ", "=big ")
    host = items(emu.compute.instance(ZONE, "big-7"))  # made from the template
    assert host["startup-script"] == items(template)["startup-script"]
    assert host["tpu-worker-id"] == "7"  # the script's worker index
    assert setup_of(world, "big")["bootstrap"] == "pending"  # nothing reported yet

    emu.compute.set_guest_attribute(ZONE, "one", "setup", "g2 done")
    for i in range(HOSTS - 1):
        emu.compute.set_guest_attribute(ZONE, f"big-{i}", "setup", "g2 done")
    emu.compute.set_guest_attribute(ZONE, "big-15", "setup", "g2 running 1/1 01-setup.sh")
    await world.until("one set up", lambda: setup_of(world, "one")["bootstrap"] == "done")
    await world.until(
        "big's last host running",
        lambda: (
            setup_of(world, "big").get("at_boot", {}).get("workers")
            == ["done"] * (HOSTS - 1) + ["running"]
        ),
    )
    assert setup_of(world, "big")["bootstrap"] == "running"
    emu.compute.set_guest_attribute(ZONE, "big-15", "setup", "g2 done")
    await world.until("big set up", lambda: setup_of(world, "big")["bootstrap"] == "done")
    assert setup_of(world, "big")["at_boot"]["workers"] == ["done"] * HOSTS
    assert not world.events("action.started", action="bootstrap")  # nothing over SSH
    reads = emu.request_counts()["GET compute.instances.getGuestAttributes"]
    assert reads >= 1 + HOSTS
    await world.stop()
    assert emu.request_counts()["GET compute.instances.getGuestAttributes"] == reads
    assert decode_all(emu.requests()) > 20


async def test_a_new_generation_runs_over_ssh_and_goes_into_the_vms_metadata(
    setup_world: Callable[..., SetupWorld],
) -> None:
    world = setup_world(1, record_responses=True)
    emu = world.harness.emulator
    script = "#!/bin/sh\necho g >> {marks}/ran-$TPU_RECONCILER_WORKER\n"
    world.harness.path.with_name("setup.sh").write_text(script.format(marks=world.marks))

    def file(generation: int) -> str:
        return world.desired(
            "slots:\n"
            f"  - {{name: one, zone: {ZONE}, accelerator: tpu7x-8, mode: spot, want: held,\n"
            f"     setup: {{at_boot: true, generation: {generation}}}}}\n",
            settings="setup_scripts: [setup.sh]\ninternal_ips: true",
        )

    world.write(file(0))
    await world.start()
    await world.until("one READY", lambda: world.slot("one")["node_state"] == "READY")
    uid = emu.compute.instance(ZONE, "one")["id"]  # type: ignore[index]
    emu.compute.set_guest_attribute(ZONE, "one", "setup", "g0 done")
    await world.until("set up at boot", lambda: setup_of(world, "one")["bootstrap"] == "done")
    assert world.markers() == [0]  # the boot ran it (none here), not SSH

    world.write(file(1))
    await world.until(
        "generation 1 set up",
        lambda: (
            setup_of(world, "one")["generation"] == 1
            and setup_of(world, "one")["bootstrap"] == "done"
        ),
        timeout=30,
    )
    assert world.markers() == [1]  # over SSH, once
    vm = emu.compute.instance(ZONE, "one")
    assert vm is not None and vm["id"] == uid  # the same VM: nothing re-created for it
    assert boot_generation(items(vm)["startup-script"]) == 1  # its next boots
    assert items(vm)["tpu-worker-id"] == "0"  # the keys it had stay
    assert emu.request_counts()["POST compute.instances.setMetadata"] == 1
    await world.stop()
    assert decode_all(emu.requests()) > 5
