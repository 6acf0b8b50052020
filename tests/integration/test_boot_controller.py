"""``setup.at_boot`` through the real controller and the emulator.

The create carries the setup scripts in the node's startup-script metadata; the emulator keeps
it on the queued resource's node and returns it on get and list. No VM boots here, so the test
writes each worker's ``tpu-reconciler/setup`` guest attribute as a booted worker's script
would; the controller reads them back and shows the node set up — without any setup over SSH.
With real sshd workers, a setup generation bumped on the held node runs over SSH (as without
``at_boot``) and the node's metadata is updated for its next boot; the TPU is not re-created.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from reconciler.model.boot_script import boot_generation
from tests.fixtures.setup_world import ZONE, NtfyServer, SetupWorld

pytestmark = pytest.mark.integration

SCRIPT = "#!/bin/sh\necho run-$TPU_RECONCILER_WORKER >> {marks}/ran-$TPU_RECONCILER_WORKER\n"


def at_boot(world: SetupWorld, generation: int = 0, accelerator: str = "v4-16") -> str:
    world.harness.path.with_name("setup.sh").write_text(SCRIPT.format(marks=world.marks))
    return world.desired(
        "slots:\n"
        "  - name: alpha\n"
        f"    zone: {ZONE}\n"
        f"    accelerator: {accelerator}\n"
        "    want: held\n"
        f"    setup: {{at_boot: true, generation: {generation}}}\n",
        settings="setup_scripts: [setup.sh]",
    )


def node_json(world: SetupWorld) -> dict[str, Any]:
    node = world.harness.emulator.node(ZONE, "alpha")
    assert node is not None
    return node


def setup_of(world: SetupWorld) -> dict[str, Any]:
    setup: dict[str, Any] = world.slot("alpha")["setup"]
    return setup


def report(world: SetupWorld, value: str, worker: int | None = None) -> None:
    world.harness.emulator.set_guest_attribute(ZONE, "alpha", "setup", value, worker=worker)


def ssh_setups(world: SetupWorld) -> int:
    return len(world.events("action.started", slot="alpha", action="bootstrap"))


async def test_the_node_boots_with_its_setup_and_the_reports_say_it_is_done(
    cloud_world: Callable[[], SetupWorld],
) -> None:
    world = cloud_world()
    world.write(at_boot(world))
    await world.start()
    await world.until("alpha's node READY", lambda: world.slot("alpha")["node_state"] == "READY")
    script = node_json(world)["metadata"]["startup-script"]
    assert boot_generation(script) == 0 and "02-" not in script and "01-setup.sh" in script
    qr = world.harness.emulator.queued_resource(ZONE, "alpha")
    assert qr is not None
    assert qr["tpu"]["nodeSpec"][0]["node"]["metadata"]["enable-guest-attributes"] == "TRUE"
    listed = {n["name"].rsplit("/", 1)[1]: n for n in world.harness.emulator.nodes()}
    assert listed["alpha"]["metadata"]["startup-script"] == script
    assert setup_of(world)["bootstrap"] == "pending"  # nothing reported yet

    report(world, "g0 running 1/1 01-setup.sh", worker=0)
    await world.until(
        "worker 0 running",
        lambda: setup_of(world).get("at_boot", {}).get("workers") == ["running", "waiting"],
    )
    assert setup_of(world)["bootstrap"] == "running"
    report(world, "g0 done")
    await world.until("set up at boot", lambda: setup_of(world)["bootstrap"] == "done")
    assert setup_of(world)["at_boot"] == {
        "generation": 0,
        "workers": ["done", "done"],
        "detail": "",
    }
    assert ssh_setups(world) == 0  # no setup over SSH (an emulated node has no machine)
    reads = world.harness.emulator.request_counts()["POST nodes.getGuestAttributes"]
    passes = world.harness.emulator.request_counts()["GET queuedResources.list"]
    await world.until(
        "two more passes",
        lambda: world.harness.emulator.request_counts()["GET queuedResources.list"] >= passes + 2,
    )
    assert world.harness.emulator.request_counts()["POST nodes.getGuestAttributes"] == reads


async def test_a_failed_boot_is_shown_told_and_not_run_over_ssh(
    cloud_world: Callable[[], SetupWorld], ntfy_server: NtfyServer
) -> None:
    world = cloud_world()
    text = at_boot(world).replace(
        "  fast_poll_interval",
        f"  ntfy_server: {ntfy_server.url}\n  ntfy_topic: t\n  fast_poll_interval",
    )
    world.write(text)
    await world.start()
    await world.until("alpha's node READY", lambda: world.slot("alpha")["node_state"] == "READY")
    report(world, "g0 done", worker=0)
    report(world, "g0 failed 01-setup.sh exit 3", worker=1)
    await world.until("failed at boot", lambda: setup_of(world)["bootstrap"] == "failed")
    assert setup_of(world)["at_boot"]["detail"] == "01-setup.sh exit 3 on worker 1"
    await world.until("the notice", lambda: "boot-failed" in ntfy_server.events("t"))
    assert ntfy_server.events("t").count("boot-failed") == 1
    assert ssh_setups(world) == 0


async def test_a_new_generation_runs_over_ssh_and_for_the_next_boot(
    setup_world: Callable[[int], SetupWorld],
) -> None:
    world = setup_world(2)
    world.write(at_boot(world))
    await world.start()
    await world.until("alpha's node READY", lambda: world.slot("alpha")["node_state"] == "READY")
    uid = node_json(world)["id"]
    report(world, "g0 done")
    await world.until("set up at boot", lambda: setup_of(world)["bootstrap"] == "done")
    assert world.markers() == [0, 0]  # the boot ran it, not SSH

    world.write(at_boot(world, generation=1))
    await world.until(
        "generation 1 set up",
        lambda: setup_of(world)["generation"] == 1 and setup_of(world)["bootstrap"] == "done",
        timeout=40,
    )
    assert world.markers() == [1, 1]  # over SSH, on every worker
    assert ssh_setups(world) == 1
    node = node_json(world)
    assert node["id"] == uid  # the same TPU: nothing re-created for it
    assert boot_generation(node["metadata"]["startup-script"]) == 1  # its next boots
    assert node["metadata"]["enable-guest-attributes"] == "TRUE"
