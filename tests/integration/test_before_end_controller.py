"""``workload.before_end`` through the real controller: an emulated flex-start v4-32 whose four
workers are real sshd, a maintenance window announced on its node, and the run's end.

The controller's clock is moved (``clock_offset``) instead of waiting: at ``lead`` before each
end the command runs once on every worker (its output in the attempt's log), a notice says
what is coming, and a restarted controller does not run it again.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from reconciler.model.stamps import epoch
from reconciler.model.times import utc_text
from tests.fixtures.setup_world import ZONE, NtfyServer, SetupWorld
from tests.integration.test_workload_controller import kill_workloads

pytestmark = pytest.mark.integration

JOB = """\
echo "started $TPU_RECONCILER_WORKER" >> started-$TPU_RECONCILER_WORKER
while [ ! -f stop-all ]; do sleep 0.1; done
"""
BEFORE = (
    'echo "$TPU_RECONCILER_END $TPU_RECONCILER_END_TIME $TPU_RECONCILER_WORKER '
    '$TPU_RECONCILER_ATTEMPT $TPU_RECONCILER_PID $EXP" >> ends-$TPU_RECONCILER_WORKER; '
    "echo checkpoint requested"
)
LEAD = 600.0


@pytest.fixture
async def flex_world(
    setup_world: Callable[[int], SetupWorld], ntfy_server: NtfyServer
) -> AsyncIterator[SetupWorld]:
    world = setup_world(4)
    (world.marks / "job.sh").write_text(JOB)
    world.write(
        world.desired(
            "slots:\n"
            "  - name: alpha\n"
            f"    zone: {ZONE}\n"
            "    accelerator: v4-32\n"
            "    want: held\n"
            "    mode: flex-start\n"
            "    max_run_duration: 1d\n"  # the emulator at speed 20: about 72 min of wall time
            "    setup: {bootstrap: false}\n"
            f"    workload:\n      command: [sh, job.sh]\n      workdir: {world.marks}\n"
            "      env: {EXP: one}\n      stop_grace: 2s\n"
            f"      before_end: {{command: '{BEFORE}', lead: 10m}}\n",
            settings=f"ntfy_server: {ntfy_server.url}\nntfy_topic: ends",
        )
    )
    await world.start()
    yield world
    (world.marks / "stop-all").write_text("")
    await world.stop()
    kill_workloads(world)


def ends(world: SetupWorld) -> list[list[str]]:
    """Per worker, every before_end it ran (one line each)."""
    out = []
    for w in range(4):
        path = world.marks / f"ends-{w}"
        out.append(path.read_text().splitlines() if path.exists() else [])
    return out


def running(world: SetupWorld) -> bool:
    workload = world.slot("alpha").get("workload") or {}
    return bool(workload.get("state") == "running")


def before_end(world: SetupWorld) -> dict[str, str]:
    shown: dict[str, str] = world.slot("alpha").get("before_end") or {}
    return shown


def attempt_log(world: SetupWorld, worker: int) -> str:
    assert world.cluster is not None
    (log,) = world.cluster.root.glob(f"host-*/home/.tpu-reconciler/w{worker}/alpha/*/1/output.log")
    return Path(log).read_text()


async def test_before_end_runs_once_on_every_worker_before_each_known_end(
    flex_world: SetupWorld, ntfy_server: NtfyServer
) -> None:
    world = flex_world
    await world.until("the program running", lambda: running(world), timeout=40)
    await world.until("the run's end known", lambda: bool(world.slot("alpha").get("ends_at")))
    run_end = epoch(world.slot("alpha")["ends_at"])
    window = utc_text(time.time() + 1800)
    world.harness.emulator.set_node_health(
        ZONE,
        "alpha",
        maintenance={"type": "SCHEDULED", "maintenanceStatus": "PENDING",
                     "windowStartTime": window, "canReschedule": True},
    )  # fmt: skip
    await world.until("the window known", lambda: before_end(world).get("end") == "maintenance")
    shown = before_end(world)
    assert (shown["state"], shown["at"]) == ("scheduled", window)
    assert shown["runs_at"] == utc_text(epoch(window) - LEAD)
    command = world.slot("alpha")["maintenance"]["command"]
    assert command.startswith("gcloud alpha compute tpus tpu-vm perform-maintenance alpha ")
    assert ends(world) == [[]] * 4

    world.clock_offset = epoch(window) - LEAD + 30 - time.time()  # 9.5 minutes before it
    await world.until("ran on every worker", lambda: all(ends(world)), timeout=20)
    await world.until("ran, in status", lambda: before_end(world).get("state") == "ran")
    lines = ends(world)
    for w, seen in enumerate(lines):
        (line,) = seen
        kind, at, worker, attempt, pid, exp = line.split()
        assert (kind, at, worker, attempt, exp) == ("maintenance", window, str(w), "1", "one")
        assert int(pid) > 0  # the program's process group, to signal it
    assert "ran on 4 workers" in before_end(world)["last"]
    log = attempt_log(world, 2)
    assert f"--- tpu-reconciler before_end: maintenance at {window} ---" in log
    assert "checkpoint requested" in log and "--- tpu-reconciler before_end exit 0 ---" in log
    await world.until("the notice", lambda: "before-end" in ntfy_server.events("ends"))
    (notice,) = [b for b in ntfy_server.received if "before-end" in (b.get("tags") or [])]
    assert (
        f"maintenance window starts at {window}: before_end command sent to 4 workers"
        in (notice["message"])
    )
    assert running(world)  # the program goes on: before_end is no stop

    await world.restart()  # a restarted controller does not run it again
    passes = world.harness.emulator.request_counts()["GET queuedResources.list"]
    await world.until(
        "three more passes",
        lambda: world.harness.emulator.request_counts()["GET queuedResources.list"] >= passes + 3,
    )
    assert [len(seen) for seen in ends(world)] == [1, 1, 1, 1]

    world.clock_offset = run_end - LEAD + 30 - time.time()  # then the flex-start run's end
    await world.until("ran before the run's end", lambda: all(len(e) == 2 for e in ends(world)))
    for w, seen in enumerate(ends(world)):
        assert seen[1].split()[:3] == ["flex-start", world.slot("alpha")["ends_at"], str(w)]
    # the workers wrote their lines during the action; its event follows when all return
    await world.until(
        "the second before_end recorded",
        lambda: len(world.events("action.succeeded", slot="alpha", action="before_end")) == 2,
    )
    assert len(world.events("action.succeeded", slot="alpha", action="before_end")) == 2
