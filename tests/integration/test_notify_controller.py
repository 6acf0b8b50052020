"""ntfy notices through the real controller, published to a real local HTTP server.

Each node instance is announced once when it becomes ACTIVE — not again on later passes, not
after a controller restart — a preemption is announced once, and the re-created instance gets
its own "active" notice.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from tests.fixtures.setup_world import ZONE, NtfyServer, SetupWorld

pytestmark = pytest.mark.integration

TOPIC = "tpu-5c0f9e2a7b41d8e3a6f1"


async def test_one_notice_per_instance_and_event_across_restarts(
    cloud_world: Callable[[], SetupWorld], ntfy_server: NtfyServer
) -> None:
    world = cloud_world()
    world.write(
        world.desired(
            f"slots:\n  - name: alpha\n    zone: {ZONE}\n    accelerator: v4-8\n    want: held\n",
            settings=f"ntfy_server: {ntfy_server.url}\nntfy_topic: {TOPIC}",
        )
    )
    await world.start()
    await world.until("the active notice", lambda: ntfy_server.events() == ["active"])
    first = world.slot("alpha")["instance"]
    await asyncio.sleep(2.0)  # steady passes
    await world.restart()
    await asyncio.sleep(1.5)
    assert ntfy_server.events() == ["active"]

    world.harness.emulator.preempt(ZONE, "alpha")
    await world.until(
        "the re-created instance announced",
        lambda: ntfy_server.events() == ["active", "preempted", "active"],
        timeout=30,
    )
    second = world.slot("alpha")["instance"]
    assert second not in (None, first)
    await asyncio.sleep(1.5)
    assert ntfy_server.events() == ["active", "preempted", "active"]
    bodies = ntfy_server.received
    assert {b["topic"] for b in bodies} == {TOPIC}
    assert [b["title"] for b in bodies] == [
        "alpha is ACTIVE",
        "alpha was preempted",
        "alpha is ACTIVE",
    ]
    assert "v4-8" in bodies[0]["message"] and "re-queueing" in bodies[1]["message"]
