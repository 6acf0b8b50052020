"""``workload.before_end`` on Compute Engine through the real controller: an emulated
flex-start MIG slice (``tpu7x-16``: two hosts, each a real sshd), a maintenance window announced
in one host's ``resourceStatus.upcomingMaintenance`` (the slice goes down with it), and the
run's end (``resourceStatus.scheduling.terminationTimestamp``, from ``maxRunDuration``). The
controller's clock is moved (``clock_offset``) instead of waiting: at ``lead`` before each end
the command runs once on every worker. Every Compute Engine exchange is decoded with the SDK's
message classes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from reconciler.model.stamps import epoch
from reconciler.model.times import utc_text
from tests.fixtures.setup_world import SetupWorld
from tests.integration.test_workload_controller import kill_workloads
from tests.support.compute_sdk import decode_all

pytestmark = pytest.mark.integration

ZONE = "us-central1-c"
JOB = "while [ ! -f stop-all ]; do sleep 0.1; done\n"
BEFORE = 'echo "$TPU_RECONCILER_END $TPU_RECONCILER_END_TIME $TPU_RECONCILER_WORKER" >> ends'
LEAD = 600.0


def ends(world: SetupWorld) -> list[str]:
    path = Path(world.marks / "ends")
    return path.read_text().splitlines() if path.exists() else []


def shown(world: SetupWorld) -> dict[str, str]:
    found: dict[str, str] = world.slot("one").get("before_end") or {}
    return found


async def test_before_end_runs_on_every_host_before_a_maintenance_and_the_runs_end(
    setup_world: Callable[..., SetupWorld],
) -> None:
    world = setup_world(2, record_responses=True)
    (world.marks / "job.sh").write_text(JOB)
    world.write(
        world.desired(
            "slots:\n"
            "  - name: one\n"
            f"    zone: {ZONE}\n"
            "    accelerator: tpu7x-16\n"
            "    want: held\n"
            "    mode: flex-start\n"
            "    max_run_duration: 1d\n"
            "    setup: {bootstrap: false}\n"
            f"    workload:\n      command: [sh, job.sh]\n      workdir: {world.marks}\n"
            "      stop_grace: 2s\n"
            f"      before_end: {{command: '{BEFORE}', lead: 10m}}\n",
            settings="internal_ips: true",
        )
    )
    await world.start()
    try:
        await world.until(
            "the program running",
            lambda: (world.slot("one").get("workload") or {}).get("state") == "running",
            timeout=40,
        )
        await world.until("the run's end known", lambda: bool(world.slot("one").get("ends_at")))
        run_end = world.slot("one")["ends_at"]
        window = utc_text(time.time() + 1800)
        world.harness.emulator.compute.set_maintenance(
            ZONE,
            "one-1",
            {"type": "SCHEDULED", "maintenanceStatus": "PENDING", "windowStartTime": window,
             "canReschedule": True},
        )  # fmt: skip
        await world.until("the window known", lambda: shown(world).get("end") == "maintenance")
        assert shown(world)["runs_at"] == utc_text(epoch(window) - LEAD)
        command = world.slot("one")["maintenance"]["command"]
        assert command.startswith(
            f"gcloud compute instances perform-maintenance one-0 one-1 --zone={ZONE}"
        )
        assert ends(world) == []

        world.clock_offset = epoch(window) - LEAD + 30 - time.time()
        await world.until("ran before the window", lambda: len(ends(world)) == 2)
        assert sorted(ends(world)) == [f"maintenance {window} {w}" for w in (0, 1)]
        await world.until("ran, in status", lambda: shown(world).get("state") == "ran")

        world.clock_offset = epoch(run_end) - LEAD + 30 - time.time()
        await world.until("ran before the run's end", lambda: len(ends(world)) == 4)
        assert sorted(ends(world)[2:]) == [f"flex-start {run_end} {w}" for w in (0, 1)]
        await world.until(
            "both told",
            lambda: len(world.events("action.succeeded", slot="one", action="before_end")) == 2,
        )
    finally:
        (world.marks / "stop-all").write_text("")
        await world.stop()
        kill_workloads(world)
    assert decode_all(world.harness.emulator.requests()) > 5
